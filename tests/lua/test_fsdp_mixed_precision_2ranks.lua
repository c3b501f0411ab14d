-- nproc: 2
-- FSDP's mixed precision policy (FullyShardedDataParallelPlugin{
-- mixed_precision_policy = ...}) on 2 ranks over real processes. With
-- param_dtype bfloat16, reduce_dtype float32, output_dtype float32, FULL_SHARD
-- by Block trains the small transformer-like model of helpers/sharding_net.lua
-- for 8 AdamW steps to the losses and weights of one process under the same
-- policy written out here: float32 master weights (AdamW steps them) cast to
-- bfloat16 for each step's forward and backward over the whole batch, each
-- Block's input cast to bfloat16 and the model's output to float32, the
-- bfloat16 gradients cast back to float32.
-- Tolerances, measured on this machine (2 ranks, one thread each, AdamW at
-- lr 2e-2): the largest differences were 2.05e-3 in a loss and 3.54e-3 in a
-- weight (bf16 rounds each rank's half-batch weight gradient, where one
-- process rounds the whole batch's); the bounds are 5e-3 and 1e-2. They
-- mean something: the same run in float32 (no policy) lies 4.1e-2 from
-- the bf16 reference, beyond the bound, checked below.
-- Also: the shards, their gradients and AdamW's state are float32 while the
-- model's parameters are bfloat16; the bytes all-gathered per step are half
-- of float32's, exactly (accel.core.dist.counts().all_gather_bytes: 2648
-- against 5296 a rank), reduce-scattered the same with reduce_dtype
-- float32 and half with reduce_dtype nil (param_dtype); the
-- float32 policy trains bit for bit as no policy; get_state_dict gives
-- float32 weights, and save_state / load_state bring them back bit for bit
-- (not rounded to bf16); bad policies are refused naming the key.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local net = dofile(arg[0]:match("(.*/)") .. "helpers/sharding_net.lua")
local dist = require("accel.core").dist
local F = accel.nn.functional

local STEPS, B = 8, 4
local LOSS_TOL, WEIGHT_TOL = 5e-3, 1e-2

-- Refusals and what the plugin shows.
local Plugin = accel.FullyShardedDataParallelPlugin
check.raises(function() Plugin{ mixed_precision_policy = { param_dtyp = accel.bfloat16 } } end,
             "an unknown key", "mixed_precision_policy", "param_dtyp")
check.raises(function() Plugin{ mixed_precision_policy = { reduce_dtype = "int8" } } end,
             "a dtype that is not floating", "reduce_dtype", "int8")
check.raises(function() Plugin{ mixed_precision_policy = "bf16" } end, "not a table", "mixed_precision_policy")
check.raises(function() Plugin{ mixed_precision_policy = { cast_forward_inputs = 1 } } end,
             "cast_forward_inputs not a boolean", "cast_forward_inputs")
check.raises(function()
  Plugin{ sharding_strategy = "SHARD_GRAD_OP", mixed_precision_policy = { param_dtype = accel.bfloat16 } }
end, "a strategy that gathers no parameters", "FULL_SHARD", "SHARD_GRAD_OP")
local bf16_policy = { param_dtype = accel.bfloat16, reduce_dtype = accel.float32, output_dtype = accel.float32 }
local shown = tostring(Plugin{ transformer_layer_cls = "Block", mixed_precision_policy = bf16_policy })
check.truthy(shown:find("param_dtype=bfloat16, reduce_dtype=float32, output_dtype=float32", 1, true),
             "the plugin shows its policy: " .. shown)
check.truthy(tostring(accel.MixedPrecisionPolicy{}):find("param_dtype=nil", 1, true), "defaults shown")

local function fsdp(policy)
  local acc = accel.Accelerator{ fsdp_plugin = Plugin{ transformer_layer_cls = "Block",
                                                         mixed_precision_policy = policy } }
  accel.set_seed(11)
  local model = net.Net()
  local opt = net.optimizer(model)
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt, losses = {}, gathered = {}, scattered = {} }
end

local runs = {
  bf16 = fsdp(bf16_policy),
  fp32 = fsdp(nil),
  fp32_policy = fsdp({ param_dtype = accel.float32, reduce_dtype = accel.float32 }),
  bf16_reduce = fsdp({ param_dtype = accel.bfloat16 }),  -- reduce_dtype nil: param_dtype, as FSDP2's
}
local order = { runs.bf16, runs.fp32, runs.fp32_policy, runs.bf16_reduce }  -- the same collectives in the same order on each rank
local rank, world = runs.bf16.acc.process_index, runs.bf16.acc.num_processes
check.equal(world, 2, "ranks")

-- The one-process reference under the same policy.
accel.set_seed(11)
local master = net.Net()
local master_opt = net.optimizer(master)
accel.set_seed(11)
local compute = net.Net():to(accel.bfloat16)
rawset(compute, "scale", master.scale)  -- buffers are not cast, as under FSDP
for _, block in ipairs({ compute.block1, compute.block2 }) do
  local forward = block.forward
  rawset(block, "forward", function(m, x) return forward(m, x:to(accel.bfloat16)) end)
end
local master_params, compute_params = master:parameters(), compute:parameters()
local reference = {}
local function reference_step(x, y)
  accel.no_grad(function()
    for i, p in ipairs(compute_params) do p:copy_(master_params[i]) end
  end)
  local loss = F.cross_entropy(compute(x:to(accel.bfloat16)):to(accel.float32), y)
  loss:backward()
  for i, p in ipairs(master_params) do
    p.grad = compute_params[i].grad:to(accel.float32)
    compute_params[i].grad = nil
  end
  master_opt:step()
  master_opt:zero_grad()
  reference[#reference + 1] = loss:item()
end

accel.set_seed(3)
local x, y = accel.randn(STEPS * B * world, 5), accel.randint(1, 4, { STEPS * B * world })
for step = 1, STEPS do
  local batch = (step - 1) * B * world
  local xs, ys = x:narrow(1, batch + rank * B + 1, B), y:narrow(1, batch + rank * B + 1, B)
  for _, run in ipairs(order) do
    local before = dist.counts()
    local loss = F.cross_entropy(run.model(xs), ys)
    run.acc:backward(loss)
    if run == runs.bf16 then
      for g = 1, run.opt.optimizer:num_param_groups() do
        for _, shard in ipairs(run.opt.optimizer:params(g)) do
          check.equal(shard.grad.dtype, "float32", "the shards' gradients")
        end
      end
    end
    run.opt:step()
    run.opt:zero_grad()
    local after = dist.counts()
    run.gathered[step] = after.all_gather_bytes - before.all_gather_bytes
    run.scattered[step] = after.reduce_scatter_bytes - before.reduce_scatter_bytes
    run.losses[step] = run.acc:reduce(loss:detach(), "mean"):item()
  end
  reference_step(x:narrow(1, batch + 1, B * world), y:narrow(1, batch + 1, B * world))
end

-- The bytes gathered: half, every step.
for step = 1, STEPS do
  check.truthy(runs.fp32.gathered[step] > 0, "float32 gathers parameters")
  check.equal(runs.bf16.gathered[step] * 2, runs.fp32.gathered[step], "step " .. step .. ": bf16 gathers half the bytes")
  check.equal(runs.bf16.scattered[step], runs.fp32.scattered[step], "step " .. step .. ": reduce_dtype float32")
  check.equal(runs.bf16_reduce.scattered[step] * 2, runs.fp32.scattered[step],
              "step " .. step .. ": reduce_dtype nil reduce-scatters in bf16")
end
if rank == 0 then
  print(string.format("bytes a rank gathers per step: float32 %d, bf16 %d; reduce-scatters: float32 %d, bf16 %d",
                      runs.fp32.gathered[1], runs.bf16.gathered[1], runs.fp32.scattered[1], runs.bf16_reduce.scattered[1]))
end

-- Dtypes: bf16 parameters to compute with, float32 shards, gradients and state.
for _, p in ipairs(runs.bf16.model:parameters()) do check.equal(p.dtype, "bfloat16", "a parameter's dtype") end
for key, t in pairs(runs.bf16.opt.optimizer:state_dict()) do
  if key:match("exp_avg") then check.equal(t.dtype, "float32", "AdamW's " .. key) end
end
local engine_opt = runs.bf16.opt.optimizer
for g = 1, engine_opt:num_param_groups() do
  for _, p in ipairs(engine_opt:params(g)) do
    check.equal(p.dtype, "float32", "the optimizer steps float32 shards")
  end
end

-- The float32 policy is no policy, bit for bit.
check.near(runs.fp32_policy.losses, runs.fp32.losses, 0, "float32 policy: losses")
local fp32_state = runs.fp32.acc:get_state_dict(runs.fp32.model)
local fp32_policy_state = runs.fp32_policy.acc:get_state_dict(runs.fp32_policy.model)
for name, t in pairs(fp32_state) do check.near(fp32_policy_state[name], t, 0, "float32 policy: " .. name) end

-- bf16 on 2 ranks against the one-process bf16 reference; float32 further off.
local bf16_state = runs.bf16.acc:get_state_dict(runs.bf16.model)
local expected = master:state_dict()
local loss_diff, weight_diff, fp32_weight_diff = 0, 0, 0
for step = 1, STEPS do loss_diff = math.max(loss_diff, math.abs(runs.bf16.losses[step] - reference[step])) end
for name, t in pairs(expected) do
  check.equal(bf16_state[name].dtype, "float32", "the state dict's " .. name)
  weight_diff = math.max(weight_diff, (bf16_state[name] - t):abs():max():item())
  fp32_weight_diff = math.max(fp32_weight_diff, (fp32_state[name] - t):abs():max():item())
end
if rank == 0 then
  print(string.format("bf16 vs one process: loss %.3g, weights %.3g; float32 vs the bf16 reference: weights %.3g",
                      loss_diff, weight_diff, fp32_weight_diff))
end
check.near(runs.bf16.losses, reference, LOSS_TOL, "bf16 losses against one process")
for name, t in pairs(expected) do check.near(bf16_state[name], t, WEIGHT_TOL, "bf16 " .. name .. " against one process") end
check.truthy(fp32_weight_diff > WEIGHT_TOL, "float32 training lies outside the bf16 tolerance: " .. fp32_weight_diff)

-- A checkpoint holds the float32 weights and loads them back into the
-- shards unrounded: saved, trained one step further, loaded, bit for bit.
local dir = "/tmp/accel_test_fsdp_mixed_precision_" .. (os.getenv("MASTER_PORT") or "1")
local bf16 = runs.bf16
bf16.acc:save_state(dir)
local xs, ys = x:narrow(1, rank * B + 1, B), y:narrow(1, rank * B + 1, B)
bf16.acc:backward(F.cross_entropy(bf16.model(xs), ys))
bf16.opt:step()
bf16.opt:zero_grad()
local moved = bf16.acc:get_state_dict(bf16.model)
check.truthy((moved["head.weight"] - bf16_state["head.weight"]):abs():max():item() > 0, "the extra step moved")
bf16.acc:load_state(dir)
local loaded = bf16.acc:get_state_dict(bf16.model)
for name, t in pairs(bf16_state) do check.near(loaded[name], t, 0, "loaded " .. name) end

-- cast_forward_inputs = false leaves a Block's float32 input (the embedding
-- times the float32 buffer) as it is, which its bf16 weights refuse.
local uncast = fsdp({ param_dtype = accel.bfloat16, cast_forward_inputs = false })
check.raises(function() uncast.model(xs:to(accel.bfloat16)) end, "cast_forward_inputs = false",
             "must have the same dtype", "float32[4, 8], bfloat16[16, 8]")

check.done("test_fsdp_mixed_precision_2ranks")
