-- An optimizer's state keyed by its parameters' names, and back: how
-- checkpoints whose ranks hold other parameters than one process's (a
-- pipeline's stages, pipeline_checkpoint.lua; experts split over ep,
-- expert_checkpoint.lua) write it, so that a layout whose indices differ
-- loads it:
--   param_groups.<g>.<hyperparameter>   as the engine's state dict has it
--   state.<parameter name>.<slot>       e.g. state.model.norm.weight.exp_avg
local core = require("accel.core")

local optimizer_by_name = {}

-- `state` (an engine state dict: "state.<i>.<slot>", i from 0) keyed by
-- names[i]; the groups' parameter lists are dropped (the indices mean
-- nothing by name). An index without a name is refused: it is optimizer
-- `j`'s, and `who` says what names the state.
function optimizer_by_name.named(state, names, j, who)
  local out = {}
  for key, t in pairs(state) do
    local index, slot = key:match("^state%.(%d+)%.(.+)$")
    if index then
      local name = names[tonumber(index)] or error(string.format(
        "optimizer %d steps a parameter (index %s) that is none of the prepared models': %s names each optimizer "
          .. "state by its parameter", j, index, who), 0)
      out["state." .. name .. "." .. slot] = t
    elseif not key:match("^param_groups%.%d+%.params$") then
      out[key] = t
    end
  end
  return out
end

-- One process's state dict of optimizer `j` (read from `path`) keyed by
-- name, its indices those of `names` (a list: the whole model's
-- parameters() order, the optimizer made on model:parameters()); `who`
-- says what loads it, in the error for a count that is not the model's.
function optimizer_by_name.of_one_process(state, names, j, path, who)
  local count, by_index = 0, {}
  for key, t in pairs(state) do
    if key:match("^param_groups%.%d+%.params$") then count = count + t:numel() end
  end
  if count ~= #names then
    error(string.format("'%s' steps %d parameter(s) but the model has %d: %s loads the optimizer state of one "
                        .. "process made on model:parameters() (in that order)", path, count, #names, who), 0)
  end
  for k, name in ipairs(names) do by_index[k - 1] = name end
  return optimizer_by_name.named(state, by_index, j, who)
end

-- "state.<name>.<slot>" -> name, slot; nil for any other key.
function optimizer_by_name.state_key(key)
  local rest = key:match("^state%.(.+)$")
  if rest then return rest:match("^(.+)%.([^%.]+)$") end
end

-- An engine state dict from `named` (keyed by name, read from `path`, named
-- in errors) for the optimizer whose state dict is `current` now: its own
-- groups' parameter lists, or with `group_sizes` (the layout before
-- sharding that its load takes) as many indices per group; the saved
-- hyperparameters of its groups; and the state of each of its parameters
-- (`names`: index from 0 -> name) that `named` holds.
function optimizer_by_name.indexed(named, names, current, path, group_sizes)
  local out, groups, saved_groups, count = {}, 0, {}, 0
  for key in pairs(current) do
    if key:match("^param_groups%.%d+%.params$") then groups = groups + 1 end
  end
  for key in pairs(named) do
    local g = key:match("^param_groups%.(%d+)%.")
    if g and not saved_groups[tonumber(g)] then saved_groups[tonumber(g)], count = true, count + 1 end
  end
  if count ~= groups then
    error(string.format("'%s' holds %d parameter group(s) but the optimizer has %d", path, count, groups), 0)
  end
  for key, t in pairs(current) do
    local g = key:match("^param_groups%.(%d+)%.")
    if g and not saved_groups[tonumber(g)] then
      error(string.format("'%s' holds no parameter group %d, which the optimizer has", path, tonumber(g) + 1), 0)
    end
    if key:match("^param_groups%.%d+%.params$") then
      out[key] = t
    elseif g then
      out[key] = named[key] or error(string.format("'%s' lacks '%s'", path, key), 0)
    end
  end
  if group_sizes then
    local first = 0
    for g, n in ipairs(group_sizes) do
      out[string.format("param_groups.%d.params", g - 1)] = core.arange(first, first + n, { dtype = "int64" })
      first = first + n
    end
  end
  local slots = {}
  for key in pairs(named) do
    local name, slot = optimizer_by_name.state_key(key)
    if name then
      slots[name] = slots[name] or {}
      slots[name][#slots[name] + 1] = slot
    end
  end
  for index, name in pairs(names) do
    for _, slot in ipairs(slots[name] or {}) do out["state." .. index .. "." .. slot] = named["state." .. name .. "." .. slot] end
  end
  return out
end

return optimizer_by_name
