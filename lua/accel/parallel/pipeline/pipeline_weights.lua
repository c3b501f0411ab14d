-- A pipelined model's full weights (pipelined_model.lua) under the whole
-- model's names: the Accelerator's get_state_dict and save_model gather
-- them from the stages' ranks, load_model gives each rank its stages' of
-- full weights.
local core = require("accel.core")
local args = require("accel.util.args")
local gathering = require("accel.gathering")

local pipeline_weights = {}

-- The whole model's state dict, copied, on every rank (a collective over
-- the world, then the pp group): each tensor broadcast from the first pp
-- rank holding it (a tied weight is held by two).
function pipeline_weights.full_state_dict(model, world)
  local p = model.pipeline
  local mine, held, device = {}, {}, "cpu"
  for key, t in pairs(model:state_dict()) do
    device = t.device
    local name = p.names.stage[key]
    held[name] = t
    mine[name] = { shape = t:size(), dtype = t.dtype }
  end
  local all = gathering.gather_object(world, { pp = p.pp.rank, tensors = mine })
  local owner = {}
  for _, r in ipairs(all) do
    for name, info in pairs(r.tensors) do
      if not owner[name] or r.pp < owner[name].pp then owner[name] = { pp = r.pp, info = info } end
    end
  end
  local out = {}
  for _, name in ipairs(p.names.order) do
    local o = owner[name]
    if not o then args.error(string.format("Accelerator:get_state_dict: no stage holds %q", name)) end
    local t = o.pp == p.pp.rank and held[name]:detach():clone()
      or core.empty(o.info.shape, { dtype = o.info.dtype, device = device })
    p.pp:broadcast(t, o.pp)
    out[name] = t
  end
  return out
end

-- The whole model's {name, tensor} in the order save_model writes them.
function pipeline_weights.ordered(model, full)
  local out = {}
  for i, name in ipairs(model.pipeline.names.order) do out[i] = { name, full[name] } end
  return out
end

-- This rank's stages' state dict from full weights by the whole model's
-- names (what load_model read), the names it lacks refused naming `dir`.
function pipeline_weights.stage_state(model, weights, dir)
  local out, missing = {}, {}
  for key, name in pairs(model.pipeline.names.stage) do
    out[key] = weights[name]
    if not out[key] then missing[#missing + 1] = name end
  end
  if #missing > 0 then
    table.sort(missing)
    error(string.format("'%s' lacks the stages' %s", dir, table.concat(missing, ", ")), 0)
  end
  return out
end

return pipeline_weights
