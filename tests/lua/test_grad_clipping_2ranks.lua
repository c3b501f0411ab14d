-- nproc: 2
-- clip_grad_norm for every norm type over all gradient elements together,
-- viewed as one vector (PyTorch's documentation): for gradients
-- {0.5, -3, 2} and {-0.1}, 0 counts the non-zeros (4), -inf is the smallest
-- |g| (0.1), inf the largest (3), and 1, 2 and 3.5 are the p-norms
-- PyTorch's clip_grad_norm_ gives (printed by torch 1.13). The sharded
-- model's norm over every rank's slices (ZeRO stages 2 and 3) equals plain
-- data parallel's for each type, padding left out.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim

local expected = { [0] = 4, [1] = 5.6, [2] = 3.641428232, [3.5] = 3.192971706, [math.huge] = 3, [-math.huge] = 0.1 }
for norm_type, want in pairs(expected) do
  local a = accel.tensor({ 0.5, -3, 2 }):requires_grad_()
  local b = accel.tensor({ -0.1 }):requires_grad_()
  a.grad, b.grad = accel.tensor({ 0.5, -3, 2 }), accel.tensor({ -0.1 })
  local norm = accel.clip_grad_norm({ a, b }, 1.0, norm_type)
  check.near(norm:item(), want, 1e-6, "norm type " .. norm_type)
  local scale = math.min(1, 1 / (want + 1e-6))
  check.near(a.grad, { 0.5 * scale, -3 * scale, 2 * scale }, 1e-6, "norm type " .. norm_type .. ": the clipped gradients")
end

-- Sharded: every rank's slices together, against plain data parallel.
local function norms(options)
  local results = {}
  for _, norm_type in ipairs({ 0, 1, 2, 3.5, math.huge, -math.huge }) do
    local acc = accel.Accelerator(options)
    accel.manual_seed(7)
    -- 5 + 5 + 10 + 2 = 22 parameters: the flat buffers are padded on 2 ranks.
    local model = nn.Sequential(nn.Linear(5, 1), nn.Linear(1, 10), nn.Linear(10, 2, false))
    local opt = optim.SGD(model:parameters(), { lr = 0.1 })
    model, opt = acc:prepare(model, opt)
    acc:backward(model(accel.randn(3, 5) * (acc.process_index + 1)):pow(2):sum())
    results[#results + 1] = acc:clip_grad_norm(model:parameters(), 1e9, norm_type):item()
  end
  return results
end
local plain = norms({})
for _, stage in ipairs({ 2, 3 }) do
  local sharded = norms({ zero_stage = stage })
  for i, norm_type in ipairs({ 0, 1, 2, 3.5, math.huge, -math.huge }) do
    check.near(sharded[i], plain[i], 1e-5, "stage " .. stage .. ", norm type " .. norm_type .. " against plain")
  end
end
check.done("test_grad_clipping_2ranks")
