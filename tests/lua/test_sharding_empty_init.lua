-- nproc: 2 3
-- Sharding a model that only the main process builds with weights: the other
-- ranks build it under accel.init_empty_weights (meta tensors) and make their
-- optimizer over the meta parameters. Checks, on the ranks of the run:
-- - memory: at stage 3 a rank other than the main process never holds the
--   whole model while preparing (its peak resident memory grows by less);
-- - training: at stages 1, 2 and 3 and FSDP by Block (built by acc:build_model
--   with cpu_ram_efficient_loading), 10 AdamW updates end
--   with the weights of plain data parallel built whole on every rank
--   (within 1e-5), a buffer built empty takes the main process's values, and
--   weights the main process alone loads (acc:load_model) reach every rank,
--   and a tied weight stays tied;
-- - errors, raised alike on every rank: meta tensors on the main process,
--   a rank whose parameters differ from the main process's, and meta
--   weights without sharding.
-- Run at 2 and 3 ranks (tests/CMakeLists.txt).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim
local here = arg[0]:match("(.*/)")
local resident_bytes = dofile(here .. "helpers/resident_bytes.lua")

local rank = accel.PartialState().process_index
local main = rank == 0
local function empty(build)
  return accel.init_empty_weights(function() return build() end)
end
local function build_on_main(build)
  if main then return build() end
  return empty(build)
end

-- VmHWM in bytes, and starting it again from the current RSS (Linux's
-- clear_refs, value 5), so that the peak of preparing is read alone.
local function peak_bytes()
  for line in io.lines("/proc/self/status") do
    local kib = line:match("^VmHWM:%s*(%d+)")
    if kib then return tonumber(kib) * 1024 end
  end
end
local function reset_peak()
  local f = assert(io.open("/proc/self/clear_refs", "w"))
  f:write("5")
  f:close()
end

-- Memory, first, in a process that has built nothing yet: 16 layers of
-- 1024 x 1024, each a unit of its own at stage 3 (over 1e6 parameters).
do
  local acc = accel.Accelerator{ zero_stage = 3 }
  local layers = 16
  local model_bytes = layers * (1024 * 1024 + 1024) * 4
  collectgarbage()
  local before = resident_bytes()
  reset_peak()
  accel.set_seed(5)
  local model = build_on_main(function()
    local list = {}
    for i = 1, layers do list[i] = nn.Linear(1024, 1024) end
    return nn.Sequential(unpack(list))
  end)
  local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
  model, opt = acc:prepare(model, opt)
  local peak, after = peak_bytes() - before, resident_bytes() - before
  if not main then
    check.truthy(peak < 0.8 * model_bytes, string.format(
      "rank %d's peak while preparing grew by %.1f MiB, less than the %.1f MiB model", rank, peak / 2 ^ 20,
      model_bytes / 2 ^ 20))
    check.truthy(after < 0.8 * model_bytes, string.format(
      "rank %d's resident memory after prepare grew by %.1f MiB, less than the %.1f MiB model", rank,
      after / 2 ^ 20, model_bytes / 2 ^ 20))
  end
  -- The shards hold the main process's values: one step trains alike.
  local x = accel.randn(2, 1024)
  acc:backward(model(x):pow(2):mean())
  opt:step()
  check.equal(#model:parameters(), 2 * layers, "the model keeps its parameters")
end
collectgarbage()

-- Training against plain data parallel.
local net = dofile(here .. "helpers/sharding_net.lua")
local Net = net.Net

local function make(options, build)
  local acc = accel.Accelerator(options)
  accel.set_seed(11)
  local model = build(Net, acc)
  local opt = net.optimizer(model)
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt }
end

local base = { gradient_accumulation_steps = net.accumulation }
local variants = {
  { "zero_stage 1", { zero_stage = 1 } },
  { "zero_stage 2", { zero_stage = 2 } },
  { "zero_stage 3", { zero_stage = 3 } },
  { "FSDP FULL_SHARD by Block, built by acc:build_model", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
      sharding_strategy = "FULL_SHARD", transformer_layer_cls = "Block", cpu_ram_efficient_loading = true } } },
}
local function whole(cls) return cls() end
-- Ranks other than the main process draw other values, so that matching
-- weights can only come from the main process's.
local function empty_elsewhere(cls, acc)
  if not main then accel.set_seed(100 + rank) end
  if not acc.sharding.empty_init then return build_on_main(cls) end
  local model = acc:build_model(function() return cls() end)
  check.equal(model.head.weight.device, main and "cpu" or "meta", "acc:build_model builds empty off the main process")
  return model
end
local plain = make(base, whole)
local runs = { plain }
for i, variant in ipairs(variants) do
  local options = { gradient_accumulation_steps = net.accumulation }
  for k, v in pairs(variant[2]) do options[k] = v end
  runs[i + 1] = make(options, empty_elsewhere)
  runs[i + 1].name = variant[1]
  check.equal(runs[i + 1].model.scale.device, "cpu", variant[1] .. ": the buffer has memory")
  check.near(runs[i + 1].model.scale, plain.model.scale, 0, variant[1] .. ": the buffer is the main process's")
end
net.train(runs)
local expected = plain.model:state_dict()
for i = 2, #runs do
  local run = runs[i]
  local got = run.acc:get_state_dict(run.model)
  for name, t in pairs(expected) do
    check.near(got[name], t, 1e-5, run.name .. ": " .. name)
  end
end

-- docs/api/sharding.md's recipe: the main process loads saved weights
-- (acc:load_model, no collective there), the others build empty.
do
  local mine = os.tmpname()
  local dir = plain.acc:gather_object(mine)[1] .. ".weights"
  plain.acc:save_model(plain.model, dir)
  local acc = accel.Accelerator{ zero_stage = 3 }
  local function build()
    local model = Net()
    acc:load_model(model, dir)
    return model
  end
  local model = acc.is_main_process and build() or empty(build)
  local opt = net.optimizer(model)
  model, opt = acc:prepare(model, opt)
  local got = acc:get_state_dict(model)
  for name, t in pairs(expected) do
    check.near(got[name], t, 0, "loaded on the main process only: " .. name)
  end
  acc:wait_for_everyone()
  if main then require("accel.core").formats.remove_folder(dir) end
  os.remove(mine)
end

-- A weight shared by two modules (a tied embedding and head) stays shared
-- when built empty, and takes the main process's values.
do
  local Tied = nn.Module:extend("Tied")
  function Tied:init()
    self.embed = nn.Embedding(10, 6)
    self.head = nn.Linear(6, 10, false)
    self.head.weight = self.embed.weight
  end
  function Tied:forward(ids) return self.head(self.embed(ids)) end
  accel.set_seed(1)
  local whole_weight = Tied().embed.weight
  for _, stage in ipairs({ 2, 3 }) do
    local acc = accel.Accelerator{ zero_stage = stage }
    accel.set_seed(1)
    local model = build_on_main(Tied)
    local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
    model, opt = acc:prepare(model, opt)
    local what = "stage " .. stage .. ": "
    check.truthy(rawequal(model.head.weight, model.embed.weight), what .. "the tied weight stays shared")
    check.equal(#opt.optimizer:params(1), 1, what .. "the optimizer steps one shard")
    check.near(acc:get_state_dict(model)["embed.weight"], whole_weight, 0, what .. "the main process's tied weight")
  end
end

-- Errors, on every rank alike.
local function prepare_with(options, build)
  local acc = accel.Accelerator(options)
  local model = build(Net)
  local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
  return acc:prepare(model, opt)
end
check.raises(function() prepare_with({ zero_stage = 2 }, empty) end,
             "meta weights on the main process", "the main process's model has",
             "on the meta device", "block1.fc1.bias, block1.fc1.weight, block1.fc2.bias and 14 more")
check.raises(function()
  prepare_with({ zero_stage = 3 }, function(cls)
    if main then return empty(cls) end
    return cls()
  end)
end, "meta weights on the main process only", "the main process's model has", "init_empty_weights")
check.raises(function()
  prepare_with({ zero_stage = 3 }, function(cls)
    if rank == 1 then return empty(function() return cls(6) end) end
    return build_on_main(cls)
  end)
end, "a rank's model differs", "rank 1's model differs from the main process's",
     "'block1.fc1.bias' is parameter float32[16] on rank 0 and parameter float32[12] on rank 1")
check.raises(function() accel.FullyShardedDataParallelPlugin{ sync_module_states = false } end,
             "sync_module_states = false", "sync_module_states = false is not supported",
             "every rank from the main process's weights")
check.raises(function() prepare_with({}, empty) end,
             "meta weights without sharding", "on the meta device", "shard it (zero_stage or fsdp_plugin)")
check.done(check.run_name("test_sharding_empty_init"))
