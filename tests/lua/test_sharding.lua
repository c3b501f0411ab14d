-- nproc: 2 3
-- Sharded data parallel against plain data parallel, on the same ranks in the
-- same run: ZeRO stages 1, 2 and 3 and FSDP's strategies train a small
-- transformer-like model for 10 AdamW updates (two param groups, gradient
-- accumulation over 2 micro-steps, clipping that bites) and end with the
-- weights of plain data parallel within 1e-5; the gradient norms clipping
-- saw are the same; what each stage promises not to keep is not kept.
-- Run at 2 and 3 ranks (tests/CMakeLists.txt).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local net = dofile(arg[0]:match("(.*/)") .. "helpers/sharding_net.lua")
local dist = require("accel.core").dist
local updates = net.updates

local function make(options)
  local acc = accel.Accelerator(options)
  accel.set_seed(11)
  local model = net.Net()
  local opt = net.optimizer(model)
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt, norms = {} }
end
local train = net.train

local base = { gradient_accumulation_steps = net.accumulation }
local function with(extra)
  local o = {}
  for k, v in pairs(base) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end
local variants = {
  { "zero_stage 1", { zero_stage = 1 } },
  { "zero_stage 2", { zero_stage = 2 } },
  { "zero_stage 3", { zero_stage = 3 } },
  { "FSDP SHARD_GRAD_OP", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "SHARD_GRAD_OP" } } },
  { "FSDP FULL_SHARD by Block", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
      sharding_strategy = "FULL_SHARD", transformer_layer_cls = "Block" } } },
  { "FSDP FULL_SHARD by size", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
      sharding_strategy = 1, min_num_params = 100 } } },
}
local plain = make(base)
local runs = { plain }
for i, variant in ipairs(variants) do
  runs[i + 1] = make(with(variant[2]))
  runs[i + 1].name = variant[1]
end
local scatters = dist.counts().reduce_scatter
train(runs)
check.truthy(dist.counts().reduce_scatter > scatters, "stages 2 and 3 reduce-scatter gradients")
check.equal(#plain.norms, updates, "clipping ran on every update")
local clipped = 0
for _, norm in ipairs(plain.norms) do
  if norm > 0.5 then clipped = clipped + 1 end
end
check.truthy(clipped > 0, "clipping bites")

local expected = plain.model:state_dict()
for i = 2, #runs do
  local run = runs[i]
  check.near(run.norms, plain.norms, 1e-5, run.name .. ": gradient norms")
  local got = run.acc:get_state_dict(run.model)
  for name, t in pairs(expected) do
    check.near(got[name], t, 1e-5, run.name .. ": " .. name)
  end
end

-- What each stage does not keep.
local world = plain.acc.num_processes
local total = 0
for _, p in ipairs(plain.model:parameters()) do total = total + p:numel() end
local function state_elements(opt)
  local n = 0
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:match("exp_avg") then n = n + t:numel() end
  end
  return n
end
for i = 2, #runs do
  local run = runs[i]
  local stage = run.acc.sharding.stage
  local kept = state_elements(run.opt)
  check.truthy(kept <= 2 * (total / world + 2 * 16), run.name .. ": optimizer state is this rank's share (" .. kept .. " elements)")
  check.truthy(kept < 2 * total, run.name .. ": less optimizer state than plain data parallel")
  if stage >= 2 then
    for name, p in run.model:named_parameters() do check.equal(p.grad, nil, run.name .. ": no full gradient of " .. name) end
  end
  if stage == 3 then
    check.equal(run.model.head.weight:numel(), 0, run.name .. ": parameters are released outside forward")
  else
    check.equal(run.model.head.weight:numel(), 24, run.name .. ": parameters stay whole")
  end
end
check.equal(runs[2].acc.distributed_type, "DEEPSPEED", "distributed_type under zero_stage")
check.equal(runs[5].acc.distributed_type, "FSDP", "distributed_type under fsdp_plugin")
check.done(check.run_name("test_sharding"))
