-- nproc: 2
-- A recipe's own loss:backward() on a prepared model synchronises as DDP's
-- does (engine/parallel/gradient_sync.h): the reduction ends with autograd's
-- pass, so gradients are the average over ranks when backward returns,
-- every backward of either kind works after it, no_sync keeps a plain
-- backward local, and every sharding stage trains as with acc:backward.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim

local function linear(acc)
  local model = nn.Linear(1, 1)
  accel.no_grad(function()
    model.weight:fill_(0.5)
    model.bias:fill_(0)
  end)
  return acc:prepare(model)
end

local acc = accel.Accelerator{}
local rank = acc.process_index
local model = linear(acc)
for k = 1, 2 do
  model.weight.grad, model.bias.grad = nil, nil
  model(accel.tensor({ { rank + k } })):sum():backward()
  check.near(model.weight.grad, { { k + 0.5 } }, 1e-6, "plain backward " .. k .. ": the average over ranks")
  check.near(model.bias.grad, { 1 }, 1e-6, "plain backward " .. k .. ": the bias's")
end
model.weight.grad, model.bias.grad = nil, nil
acc:backward(model(accel.tensor({ { rank + 3 } })):sum())
check.near(model.weight.grad, { { 3.5 } }, 1e-6, "acc:backward after plain ones")
model.weight.grad, model.bias.grad = nil, nil
model(accel.tensor({ { rank + 4 } })):sum():backward()
check.near(model.weight.grad, { { 4.5 } }, 1e-6, "a plain backward after acc:backward")

model.weight.grad, model.bias.grad = nil, nil
acc:no_sync(model, function() model(accel.tensor({ { rank + 1 } })):sum():backward() end)
check.near(model.weight.grad, { { rank + 1 } }, 1e-6, "inside no_sync a plain backward stays local")
model(accel.tensor({ { rank + 1 } })):sum():backward()
check.near(model.weight.grad, { { 2 * 1.5 } }, 1e-6, "the next one outside it sums the local part in")

-- Every sharding stage: the same training with plain backward and with acc:backward.
local function train(stage, plain)
  local a = accel.Accelerator{ zero_stage = stage }
  accel.manual_seed(0)
  local m = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
  local opt = optim.SGD(m:parameters(), { lr = 0.1 })
  m, opt = a:prepare(m, opt)
  for k = 1, 3 do
    local loss = m(accel.ones(2, 4) * (a.process_index + k)):pow(2):sum()
    if plain then loss:backward() else a:backward(loss) end
    opt:step()
    opt:zero_grad()
  end
  local full = a:get_state_dict(m)
  return full
end
for _, stage in ipairs({ 1, 2, 3 }) do
  local by_acc, by_plain = train(stage, false), train(stage, true)
  for name, t in pairs(by_acc) do
    check.near(by_plain[name], t, 1e-6, "stage " .. stage .. ": " .. name .. " after plain backwards")
  end
end
check.done("test_plain_backward_2ranks")
