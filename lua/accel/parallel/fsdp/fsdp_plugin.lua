-- accel.FullyShardedDataParallelPlugin: sharding spelled as Accelerate's FSDP
-- plugin, passed as Accelerator{fsdp_plugin = ...}.
--   accel.FullyShardedDataParallelPlugin{ sharding_strategy = "FULL_SHARD",
--     auto_wrap_policy = "TRANSFORMER_BASED_WRAP", transformer_layer_cls = "Block" }
-- sharding_strategy: "FULL_SHARD" (ZeRO stage 3: parameters, gradients and
--   optimizer state), "SHARD_GRAD_OP" (stage 2: gradients and optimizer
--   state), "NO_SHARD" (plain data parallel); FSDP's numbers 1, 2, 3 too.
-- auto_wrap_policy: which modules are gathered as one unit at stage 3:
--   "TRANSFORMER_BASED_WRAP" (modules of the classes transformer_layer_cls
--   names: a class name, a comma-separated list or a table of names),
--   "SIZE_BASED_WRAP" (every module whose parameters not wrapped below it
--   number min_num_params or more, innermost first), "NO_WRAP" (one unit).
--   Default: by class when transformer_layer_cls is given, by size when
--   min_num_params is, else NO_WRAP.
-- cpu_offload: true or {pin_memory = bool}: FSDP2's CPUOffloadPolicy, the
--   shards, gradients and optimizer state on the host (cpu_offload.lua).
-- state_dict_type: what save_state writes, "FULL_STATE_DICT" (the model and
--   optimizer as plain data parallel writes them) or "SHARDED_STATE_DICT"
--   (each rank its slices, loadable on another number of ranks).
-- sync_module_states: every rank starts from the main process's weights;
--   accel always does this (prepare broadcasts them), so only true (the
--   default) is accepted: false would leave ranks with different weights.
-- cpu_ram_efficient_loading: acc:build_model(fn) builds the model with
--   weights on the main process only and under accel.init_empty_weights on
--   the others (default false: every rank builds it whole).
-- mixed_precision_policy: FSDP2's MixedPrecisionPolicy (param_dtype,
--   reduce_dtype, output_dtype, cast_forward_inputs), a table or
--   accel.MixedPrecisionPolicy{...} (parallel/fsdp/mixed_precision_policy.lua);
--   FULL_SHARD only. Default: none (all in the parameters' dtype).
-- Launch options and config-file keys (accel.core.launch.fsdp) give
-- the defaults of what the recipe leaves out.
local core = require("accel.core")
local args = require("accel.util.args")
local cpu_offload = require("accel.parallel.fsdp.cpu_offload")
local MixedPrecisionPolicy = require("accel.parallel.fsdp.mixed_precision_policy")

local Plugin = {}
Plugin.__index = Plugin

local where = "accel.FullyShardedDataParallelPlugin"

local strategies = { FULL_SHARD = 3, SHARD_GRAD_OP = 2, NO_SHARD = 0 }
local strategy_numbers = { "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD" }
local policies = { TRANSFORMER_BASED_WRAP = true, SIZE_BASED_WRAP = true, NO_WRAP = true }
local state_dict_types = { FULL_STATE_DICT = true, SHARDED_STATE_DICT = true }

local function one_of(key, value, allowed)
  if not allowed[value] then
    local names = {}
    for name in pairs(allowed) do names[#names + 1] = name end
    table.sort(names)
    args.error(string.format("%s: %s must be one of %s, got '%s'", where, key, table.concat(names, ", "),
                             tostring(value)))
  end
end

-- "Block, Head" or {"Block", "Head"} -> {Block = true, Head = true}
local function class_set(value)
  local set, any = {}, false
  local list = type(value) == "table" and value or {}
  if type(value) == "string" then
    for name in value:gmatch("[^,%s]+") do list[#list + 1] = name end
  end
  for _, name in ipairs(list) do
    if type(name) ~= "string" then args.error(where .. ": transformer_layer_cls must name classes, got a " .. type(name)) end
    set[name], any = true, true
  end
  return any and set or nil
end

-- What accel-run was told (--use-fsdp and its options, or the config
-- file): the launch's fsdp table (bindings/launch_settings.h), each field
-- nil where the launch said nothing.
local function launcher_defaults()
  return (core.launch or {}).fsdp or {}
end

local function new(_, options)
  local o = args.options(where, options, {
    sharding_strategy = args.NONE,
    auto_wrap_policy = args.NONE,
    transformer_layer_cls = args.NONE,
    min_num_params = args.NONE,
    cpu_offload = args.NONE,
    state_dict_type = args.NONE,
    sync_module_states = args.NONE,
    cpu_ram_efficient_loading = args.NONE,
    mixed_precision_policy = args.NONE,
  }, { sharding_strategy = "string|number", auto_wrap_policy = "string", transformer_layer_cls = "string|table",
       min_num_params = "number", cpu_offload = "boolean|table", state_dict_type = "string",
       sync_module_states = "boolean", cpu_ram_efficient_loading = "boolean",
       mixed_precision_policy = "table" })
  local given_sync = o.sync_module_states
  for key, value in pairs(launcher_defaults()) do
    if o[key] == nil then o[key] = value end
  end
  if o.sync_module_states == false then
    local from = given_sync == nil and " (fsdp_sync_module_states, from accel-run)" or ""
    args.error(where .. ": sync_module_states = false" .. from .. " is not supported: prepare always starts "
               .. "every rank from the main process's weights (docs/api/sharding.md)")
  end
  local strategy = o.sharding_strategy or "FULL_SHARD"
  if type(strategy) == "number" then strategy = strategy_numbers[strategy] or tostring(strategy) end
  one_of("sharding_strategy", strategy, strategies)
  local offload = cpu_offload.from_fsdp(where, o.cpu_offload)
  if offload and strategies[strategy] == 0 then
    args.error(where .. ": cpu_offload needs sharding (FULL_SHARD or SHARD_GRAD_OP), got sharding_strategy NO_SHARD")
  end
  local classes = o.transformer_layer_cls and class_set(o.transformer_layer_cls)
  local policy = o.auto_wrap_policy
    or (classes and "TRANSFORMER_BASED_WRAP") or (o.min_num_params and "SIZE_BASED_WRAP") or "NO_WRAP"
  one_of("auto_wrap_policy", policy, policies)
  if policy == "TRANSFORMER_BASED_WRAP" and not classes then
    args.error(where .. ": auto_wrap_policy TRANSFORMER_BASED_WRAP needs transformer_layer_cls, the class "
               .. "names of the layers to wrap (e.g. \"Block\")")
  end
  if o.min_num_params ~= nil then args.positive_integer(where, "min_num_params", o.min_num_params) end
  local state_dict_type = o.state_dict_type or "FULL_STATE_DICT"
  one_of("state_dict_type", state_dict_type, state_dict_types)
  local precision = o.mixed_precision_policy and MixedPrecisionPolicy.from(o.mixed_precision_policy, where)
  if precision and strategy ~= "FULL_SHARD" then
    -- Elsewhere the model's parameters stay whole between steps, so there
    -- is no gather to cast (docs/api/sharding.md, "Mixed precision").
    args.error(string.format("%s: mixed_precision_policy needs sharding_strategy FULL_SHARD, got %s", where, strategy))
  end
  return setmetatable({
    sharding_strategy = strategy,
    stage = strategies[strategy],  -- the ZeRO stage it amounts to; 0: none
    auto_wrap_policy = policy,
    transformer_layer_cls = classes,
    min_num_params = o.min_num_params or 1e8,  -- FSDP's and Accelerate's default
    cpu_offload = offload or false,
    state_dict_type = state_dict_type,
    sync_module_states = true,
    cpu_ram_efficient_loading = o.cpu_ram_efficient_loading or false,
    mixed_precision_policy = precision,
  }, Plugin)
end

function Plugin:__tostring()
  local classes = {}
  for name in pairs(self.transformer_layer_cls or {}) do classes[#classes + 1] = name end
  table.sort(classes)
  return string.format("FullyShardedDataParallelPlugin(sharding_strategy=%s, auto_wrap_policy=%s%s, "
                       .. "state_dict_type=%s, cpu_offload=%s, cpu_ram_efficient_loading=%s, "
                       .. "mixed_precision_policy=%s)", self.sharding_strategy, self.auto_wrap_policy,
                       #classes > 0 and (", transformer_layer_cls=" .. table.concat(classes, ",")) or "",
                       self.state_dict_type, tostring(self.cpu_offload), tostring(self.cpu_ram_efficient_loading),
                       tostring(self.mixed_precision_policy or "nil"))
end

function Plugin.is(value)
  return type(value) == "table" and getmetatable(value) == Plugin
end

return setmetatable(Plugin, { __call = new })
