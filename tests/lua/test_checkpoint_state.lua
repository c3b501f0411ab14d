-- nproc: 2
-- save_state / load_state in one run on 2 ranks, with everything a
-- checkpoint holds: two models and optimizers, a schedule, the fp16 loss
-- scaler (its scale moves during the run), gradient accumulation saved
-- between two micro-steps, dropout, math.random, a loader stopped in the
-- middle of its second epoch and a registered object. The 10 micro-steps
-- after a load repeat the 10 after the save exactly.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

local dir = "/tmp/accel_test_checkpoint_state_" .. (os.getenv("MASTER_PORT") or "1")
local acc = accel.Accelerator{
  mixed_precision = "fp16", gradient_accumulation_steps = 2,
  loss_scaler = { init_scale = 2 ^ 10, growth_interval = 2 },
}
accel.set_seed(3)
local x, y = accel.randn(60, 6), accel.randint(1, 4, { 60 })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 4, shuffle = true })
local model_a = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
local model_b = nn.Linear(6, 3)
local opt_a = optim.AdamW(model_a:parameters(), { lr = 0.01 })
local opt_b = optim.SGD(model_b:parameters(), { lr = 0.1, momentum = 0.9 })
local sched = optim.lr_scheduler.cosine(opt_a, { total = 20, warmup = 3 })
model_a, model_b, opt_a, opt_b, loader, sched = acc:prepare(model_a, model_b, opt_a, opt_b, loader, sched)

local counter = { value = 0 }
function counter:state_dict() return { value = self.value } end
function counter:load_state_dict(s) self.value = s.value end
acc:register_for_checkpointing(counter)

local function micro_step(xb, yb)
  local loss
  acc:accumulate(model_a, function()
    loss = F.cross_entropy(model_a(xb), yb) + F.cross_entropy(model_b(xb), yb)
    acc:backward(loss)
    opt_a:step(); opt_b:step(); sched:step(); opt_a:zero_grad(); opt_b:zero_grad()
  end)
  counter.value = counter.value + 1
  return { loss:item(), sched:get_last_lr()[1], acc:loss_scale(), counter.value, math.random(),
           opt_a.updates, acc.sync_gradients and 1 or 0 }
end

-- `total` micro-steps across epochs; on_step(n, record) after each.
local function run(total, on_step)
  local n = 0
  while n < total do
    for xb, yb in loader:iter() do
      n = n + 1
      on_step(n, micro_step(xb, yb))
      if n == total then break end
    end
  end
end

local function parameters()
  local out = {}
  for _, p in ipairs(model_a:parameters()) do out[#out + 1] = p:clone() end
  for _, p in ipairs(model_b:parameters()) do out[#out + 1] = p:clone() end
  return out
end

-- 8 batches per epoch on each rank: the save after micro-step 11 is in the
-- middle of the second epoch and of an accumulation.
local after_save, scale_at_save = {}, nil
run(21, function(n, record)
  if n == 11 then
    check.equal(acc.sync_gradients, false, "saved between two micro-steps of one update")
    scale_at_save = acc:loss_scale()
    acc:save_state(dir)
  elseif n > 11 then
    after_save[#after_save + 1] = record
  end
end)
local final = parameters()
check.truthy(after_save[#after_save][3] ~= scale_at_save, "the loss scale moved after the save")

acc:load_state(dir)
check.equal(acc:loss_scale(), scale_at_save, "loss scale restored")
check.equal(counter.value, 11, "registered object restored")
check.equal(loader.epoch, 1, "the loader is back in its second epoch")
local replay = {}
run(10, function(_, record) replay[#replay + 1] = record end)
check.equal(#replay, 10, "ten micro-steps replayed")
for i = 1, 10 do check.near(replay[i], after_save[i], 0, "micro-step " .. (11 + i)) end
local again = parameters()
for i = 1, #final do check.near(again[i], final[i], 0, "parameter " .. i .. " after the replay") end

-- The folder is complete, with a manifest naming every rank's files.
local ck = require("accel.core").formats
local listed = {}
for _, f in ipairs(ck.read_manifest(dir).files) do listed[f.name] = f.format end
for _, name in ipairs({ "model.safetensors", "model_1.safetensors", "optimizer.safetensors",
                        "optimizer_1.safetensors", "scheduler.lua", "scaler.lua", "custom_checkpoint_0.lua",
                        "accelerator_state.lua", "rng_0.safetensors", "rng_1.safetensors",
                        "dataloader_rank_0.lua", "dataloader_rank_1.lua" }) do
  check.truthy(listed[name], "the manifest lists " .. name)
end
check.equal(listed["model.safetensors"], "safetensors", "weights are safetensors")
check.equal(listed["scheduler.lua"], "lua", "the schedule is a Lua table")

-- Misuse is refused with the reason.
check.raises(function() acc:save_state() end, "save_state() without a folder", "give a folder")
check.raises(function() acc:load_state() end, "load_state() without a folder", "give a folder")
check.raises(function() acc:register_for_checkpointing({}) end, "an object without state_dict",
             "argument 1", "state_dict")
local other = accel.Accelerator{ mixed_precision = "fp16" }
local lone = other:prepare(nn.Linear(6, 3))
check.raises(function() other:load_state(dir) end, "another set of prepared objects",
             "holds 2 model(s) but this Accelerator prepared 1")
check.truthy(lone ~= nil, "the other Accelerator prepared its model")

-- backward's num_items given as a tensor: the count saved between micro-steps
-- is a one-element tensor, which the load's field checks take.
do
  local counting = accel.Accelerator{ gradient_accumulation_steps = 2 }
  local linear = nn.Linear(2, 1)
  local sgd = optim.SGD(linear:parameters(), { lr = 0.1 })
  linear, sgd = counting:prepare(linear, sgd)
  counting:accumulate(linear, function()
    counting:backward(linear(accel.ones(3, 2)):sum(), { num_items = accel.tensor(3.0) })
    sgd:step(); sgd:zero_grad()
  end)
  counting:save_state(dir .. "_items")
  counting.gradient_state.items = 0
  counting:load_state(dir .. "_items")
  check.near(counting.gradient_state.items, { 3 }, 0, "a tensor count of items saved mid-accumulation loads back")
  counting:wait_for_everyone()
  if counting.is_main_process then ck.remove_folder(dir .. "_items") end
end

acc:wait_for_everyone()
if acc.is_main_process then ck.remove_folder(dir) end
check.done("checkpoint state")
