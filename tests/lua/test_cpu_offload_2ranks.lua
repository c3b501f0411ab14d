-- nproc: 2
-- CPU offload (FSDP's cpu_offload, ZeRO-Offload's offload_optimizer_device /
-- offload_param_device) against the same sharding without it, side by side
-- on the same ranks (also under fp16, and FSDP over a device mesh's
-- dp_shard): 10 AdamW updates (two param groups, accumulation over 2
-- micro-steps, clipping that bites) give the same weights and gradient norms
-- bit for bit, since here the compute device is the CPU and the arithmetic
-- is the same. The offloaded runs keep their shards apart from the model's
-- parameters (a copy on the host, also at stages 1 and 2) and their optimizer
-- state on the host; save_state writes the files the non-offloaded run
-- writes, and load_state into a fresh offloaded run restores that state.
-- Bad options are refused, naming the option.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local net = dofile(arg[0]:match("(.*/)") .. "helpers/sharding_net.lua")
local ck = require("accel.core").formats

local FSDP, DeepSpeed = accel.FullyShardedDataParallelPlugin, accel.DeepSpeedPlugin

local function make(options, seed)
  options.gradient_accumulation_steps = net.accumulation
  local acc = accel.Accelerator(options)
  accel.set_seed(seed or 11)
  local model = net.Net()
  local opt = net.optimizer(model)
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt, norms = {} }
end

-- {name, options without offload, options with it}
local pairs_of = {
  { "ZeRO-1 offload_optimizer", function() return { deepspeed_plugin = DeepSpeed{ zero_stage = 1 } } end,
    function() return { deepspeed_plugin = DeepSpeed{ zero_stage = 1, offload_optimizer_device = "cpu" } } end },
  { "ZeRO-2 offload_optimizer", function() return { zero_stage = 2 } end,
    function() return { deepspeed_plugin = DeepSpeed{ zero_stage = 2, offload_optimizer_device = "cpu" } } end },
  { "ZeRO-3 offload_optimizer+param", function() return { zero_stage = 3 } end,
    function() return { deepspeed_plugin = DeepSpeed{ zero_stage = 3, offload_optimizer_device = "cpu",
                                                      offload_param_device = "cpu" } } end },
  { "FSDP FULL_SHARD cpu_offload", function()
      return { fsdp_plugin = FSDP{ transformer_layer_cls = "Block", state_dict_type = "SHARDED_STATE_DICT" } } end,
    function() return { fsdp_plugin = FSDP{ transformer_layer_cls = "Block", state_dict_type = "SHARDED_STATE_DICT",
                                            cpu_offload = true } } end },
  { "FSDP SHARD_GRAD_OP cpu_offload{pin_memory}", function()
      return { fsdp_plugin = FSDP{ sharding_strategy = "SHARD_GRAD_OP", state_dict_type = "SHARDED_STATE_DICT" } } end,
    function() return { fsdp_plugin = FSDP{ sharding_strategy = "SHARD_GRAD_OP", state_dict_type = "SHARDED_STATE_DICT",
                                            cpu_offload = { pin_memory = true } } } end },
  { "ZeRO-2 offload_optimizer under fp16", function() return { zero_stage = 2, mixed_precision = "fp16" } end,
    function() return { mixed_precision = "fp16",
                        deepspeed_plugin = DeepSpeed{ zero_stage = 2, offload_optimizer_device = "cpu" } } end },
  { "FSDP over a mesh's dp_shard cpu_offload", function()
      return { parallelism_config = accel.ParallelismConfig{ dp_shard_size = 2 },
               fsdp_plugin = FSDP{ transformer_layer_cls = "Block" } } end,
    function() return { parallelism_config = accel.ParallelismConfig{ dp_shard_size = 2 },
                        fsdp_plugin = FSDP{ transformer_layer_cls = "Block", cpu_offload = true } } end },
}

local runs = {}
for _, p in ipairs(pairs_of) do
  local plain, offloaded = make(p[2]()), make(p[3]())
  plain.name, offloaded.name = p[1] .. " (not offloaded)", p[1]
  runs[#runs + 1] = { plain = plain, offloaded = offloaded, make = p[3] }
end
local all = {}
for _, r in ipairs(runs) do
  all[#all + 1] = r.plain
  all[#all + 1] = r.offloaded
end
net.train(all)

local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local work = runs[1].plain.acc:gather_object(string.format("%s/cpu_offload_%d_%d", root, os.time(),
                                                            math.random(1e9)))[1]

local function same_files(dir_a, dir_b, what)
  local compared = 0
  for _, name in ipairs(ck.list_folder(dir_a)) do
    if name:match("%.safetensors$") then
      local a, b = ck.read_safetensors(dir_a .. "/" .. name), ck.read_safetensors(dir_b .. "/" .. name)
      for key, t in pairs(a) do
        check.truthy(b[key] ~= nil, what .. ": " .. name .. " holds " .. key)
        check.near(b[key], t, 0, what .. ": " .. name .. " " .. key)
        compared = compared + 1
      end
    end
  end
  check.truthy(compared > 0, what .. ": tensors compared")
end

local function host_state(run, what)
  local flats = run.acc._models[1].sharded:flat_parameters(run.opt.optimizer).flats
  for k, flat in ipairs(flats) do
    check.truthy(flat.offloaded, what .. ": flat parameter " .. k .. " offloaded")
    check.equal(flat.shard.device, "cpu", what .. ": shard " .. k .. " on the host")
    if flat.shard.grad then check.equal(flat.shard.grad.device, "cpu", what .. ": gradient slice " .. k) end
  end
  local n = 0
  for key, t in pairs(run.opt.optimizer:state_dict()) do
    if key:match("exp_avg") then
      check.equal(t.device, "cpu", what .. ": " .. key .. " on the host")
      n = n + 1
    end
  end
  check.truthy(n > 0, what .. ": optimizer state read")
end

for i, r in ipairs(runs) do
  local plain, off = r.plain, r.offloaded
  check.near(off.norms, plain.norms, 0, off.name .. ": gradient norms")
  check.truthy(#off.norms == net.updates, off.name .. ": clipped every update")
  local expected = plain.acc:get_state_dict(plain.model)
  local got = off.acc:get_state_dict(off.model)
  for name, t in pairs(expected) do check.near(got[name], t, 0, off.name .. ": " .. name) end
  host_state(off, off.name)
  for _, flat in ipairs(plain.acc._models[1].sharded:flat_parameters(plain.opt.optimizer).flats) do
    check.equal(flat.offloaded, false, plain.name .. ": not offloaded")
  end
  -- At stages 1 and 2 the model's parameters stay whole on the device and
  -- the offloaded shard is a host copy apart from them: moving it moves no
  -- parameter until after_step publishes it.
  if off.acc.sharding.stage < 3 then
    local flat = off.acc._models[1].sharded:flat_parameters(off.opt.optimizer).flats[1]
    local before = {}
    for i, p in ipairs(off.model:parameters()) do before[i] = p:clone() end
    local kept = flat.shard:clone()
    accel.no_grad(function() flat.shard:add_(1) end)
    for i, p in ipairs(off.model:parameters()) do
      check.near(p, before[i], 0, off.name .. ": the host shard is not the model's parameter " .. i)
    end
    accel.no_grad(function() flat.shard:copy_(kept) end)
  end
  -- Checkpoints: the same files, and loading them into a fresh offloaded run.
  local dir_plain, dir_off = work .. "/plain_" .. i, work .. "/offloaded_" .. i
  plain.acc:save_state(dir_plain)
  off.acc:save_state(dir_off)
  same_files(dir_plain, dir_off, off.name .. ": save_state")
  local fresh = make(r.make(), 99)
  fresh.acc:load_state(dir_off)
  local loaded = fresh.acc:get_state_dict(fresh.model)
  for name, t in pairs(expected) do check.near(loaded[name], t, 0, off.name .. ": load_state " .. name) end
  local want = plain.opt.optimizer:state_dict()
  for key, t in pairs(fresh.opt.optimizer:state_dict()) do
    if key:match("exp_avg") then check.near(t, want[key], 0, off.name .. ": load_state " .. key) end
  end
  host_state(fresh, off.name .. " after load_state")
end

-- Options.
check.raises(function() FSDP{ cpu_offload = { pin = true } } end, "an unknown cpu_offload key", "pin",
             "cpu_offload")
check.raises(function() FSDP{ sharding_strategy = "NO_SHARD", cpu_offload = true } end,
             "offload without sharding", "cpu_offload", "NO_SHARD")
check.raises(function() FSDP{ cpu_offload = "yes" } end, "a cpu_offload of the wrong type", "cpu_offload")
check.raises(function() DeepSpeed{ zero_stage = 0, offload_optimizer_device = "cpu" } end,
             "ZeRO-Offload without sharding", "offload_optimizer_device", "zero_stage")
check.raises(function() DeepSpeed{ zero_stage = 2, offload_param_device = "cpu" } end,
             "parameter offload below stage 3", "offload_param_device", "zero_stage 3")
check.raises(function() DeepSpeed{ zero_stage = 3, offload_optimizer_device = "gpu" } end,
             "an unknown device", "offload_optimizer_device", "gpu")
check.raises(function() DeepSpeed{ zero_stage = 3, offload_param_device = "nvme" } end, "nvme",
             "offload_param_device", "nvme")
check.raises(function() DeepSpeed{ stage = 3 } end, "an unknown DeepSpeedPlugin key", "stage",
             "accel.DeepSpeedPlugin")
check.raises(function() accel.Accelerator{ zero_stage = 2, deepspeed_plugin = DeepSpeed{} } end,
             "zero_stage with deepspeed_plugin", "deepspeed_plugin")
check.equal(runs[1].offloaded.acc.distributed_type, "DEEPSPEED", "distributed_type under deepspeed_plugin")

if runs[1].plain.acc.is_main_process then ck.remove_folder(work) end
check.done("test_cpu_offload_2ranks")
