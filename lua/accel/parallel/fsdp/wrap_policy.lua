-- Which modules of a model are gathered and released as one unit at ZeRO
-- stage 3 (FSDP's auto wrap policies). units(model, policy) returns
-- {{module = m, params = {...}}, ...}: the root first, holding every
-- parameter no wrapped module holds, then the wrapped modules in definition
-- order. A parameter belongs to its innermost wrapped module; one shared by
-- two modules belongs to the first that holds it. units(model, policy,
-- alone): each parameter in the set `alone` is a unit by itself, whose
-- module is the one holding it (a pipeline's tied weight, whose gradient
-- slices must cover the same elements on both of its stages:
-- pipeline/pipeline_fsdp.lua).
--   policy.kind = "TRANSFORMER_BASED_WRAP": modules whose class name is in
--     policy.classes (a set);
--   "SIZE_BASED_WRAP": every module whose parameters not already wrapped
--     below it number policy.min_num_params or more, innermost first, as
--     FSDP's size_based_auto_wrap_policy;
--   "NO_WRAP": the root alone.
local Module = require("accel.nn.module")

local wrap_policy = {}

-- The parameters held directly by `m` (its own fields, not its children's).
local function own_parameters(m)
  local out = {}
  for _, key in ipairs(m._fields) do
    local v = rawget(m, key)
    if type(v) == "userdata" and not m._buffers[key] and v.requires_grad and v.is_leaf then out[#out + 1] = v end
  end
  return out
end

local function numel(params)
  local n = 0
  for _, p in ipairs(params) do n = n + p:numel() end
  return n
end

-- The set of modules the size policy wraps: returns the parameters left
-- unwrapped in m's subtree.
local function wrap_by_size(m, min, wrapped)
  local left = numel(own_parameters(m))
  for _, child in ipairs(m:children()) do
    local below = wrap_by_size(child, min, wrapped)
    if below >= min then
      wrapped[child] = true
    else
      left = left + below
    end
  end
  return left
end

local function wrapped_set(model, policy)
  local wrapped = {}
  if policy.kind == "TRANSFORMER_BASED_WRAP" then
    for _, m in ipairs(model:modules()) do
      if m ~= model and policy.classes[m.__name] then wrapped[m] = true end
    end
  elseif policy.kind == "SIZE_BASED_WRAP" then
    wrap_by_size(model, policy.min_num_params, wrapped)
  end
  return wrapped
end

function wrap_policy.units(model, policy, alone)
  assert(Module.is_module(model), "wrap_policy.units needs a module")
  local wrapped = wrapped_set(model, policy)
  local units = { { module = model, params = {} } }
  local seen = {}
  local function visit(m, unit)
    if m ~= model and wrapped[m] then
      units[#units + 1] = { module = m, params = {} }
      unit = units[#units]
    end
    for _, p in ipairs(own_parameters(m)) do
      if not seen[p] then
        seen[p] = true
        if alone and alone[p] then
          units[#units + 1] = { module = m, params = { p } }
        else
          unit.params[#unit.params + 1] = p
        end
      end
    end
    for _, child in ipairs(m:children()) do visit(child, unit) end
  end
  visit(model, units[1])
  -- A wrapped module without parameters of its own gathers nothing.
  local out = { units[1] }
  for i = 2, #units do
    if #units[i].params > 0 then out[#out + 1] = units[i] end
  end
  return out
end

return wrap_policy
