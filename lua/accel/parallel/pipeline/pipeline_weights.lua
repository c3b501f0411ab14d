-- A pipelined model's full weights (pipelined_model.lua) under the whole
-- model's names: the Accelerator's get_state_dict and save_model gather
-- them from the stages' ranks (under tensor parallelism each stage's tp
-- slices first, under expert parallelism the experts from their ep ranks
-- after), load_model gives each rank its stages' of full weights (its tp
-- slices of them, its experts).
local core = require("accel.core")
local args = require("accel.util.args")
local gathering = require("accel.gathering")
local tp_parameters = require("accel.parallel.tp_parameters")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")
local expert_parameters = require("accel.parallel.expert_parameters")

local pipeline_weights = {}

-- The whole model's state dict, copied, on every rank (a collective over
-- the world, then the pp group): each tensor broadcast from the first pp
-- rank holding it (a tied weight is held by two); under tensor parallelism
-- (`tp`, the mesh's tp dim, or nil) the stages' split tensors gathered
-- over tp first (a collective over it); experts split over ep gathered
-- over ep last (a collective over it).
function pipeline_weights.full_state_dict(model, world, tp)
  local p = model.pipeline
  local mine, held, device = {}, {}, "cpu"
  for key, t in pairs(tp and tp_parameters.full_state_dict(model, tp) or model:state_dict()) do
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
  -- Every stage's experts of this ep rank are here now; the others' come
  -- from the ep group (each of its ranks at the same stages).
  return expert_parameters.gather_layout(p.names.experts, out)
end

-- The whole model's {name, tensor} in the order save_model writes them.
function pipeline_weights.ordered(model, full)
  local out = {}
  for i, name in ipairs(model.pipeline.names.whole_order) do out[i] = { name, full[name] } end
  return out
end

-- This rank's stages' state dict from full weights by the whole model's
-- names (what load_model read), the names it lacks refused naming `dir`;
-- under tensor parallelism (`tp`, or nil) this tp rank's slices of them.
function pipeline_weights.stage_state(model, weights, dir, tp)
  local out, missing = {}, {}
  for key, name in pairs(model.pipeline.names.stage) do
    out[key] = weights[name]
    if not out[key] then missing[#missing + 1] = name end
  end
  if #missing > 0 then
    table.sort(missing)
    error(string.format("'%s' lacks the stages' %s", dir, table.concat(missing, ", ")), 0)
  end
  if tp then return tp_slices.slice("model", out, tp_slices.splits({ model }, {}).models[1], tp, dir) end
  return out
end

return pipeline_weights
