-- FSDP on each stage of a pipeline (pp_size > 1 with dp_shard_size > 1,
-- docs/api/parallelism.md): the ranks of a pp rank's dp_shard group hold
-- the same stages, and shard them FULL_SHARD over that group
-- (mesh.dp_shard_cp) as fsdp/mesh_sharding.lua shards a model; the
-- sharded model (engine/parallel/sharded_model.h) is then the stages'
-- gradient synchronisation. What a pipeline needs of it is here: the units
-- its stages are cut into, its tied weights' slices and the global norm.
--
-- Decisions:
-- - Each stage held is cut into units as a model is (wrap_policy.lua: the
--   stage its own unit, then the modules the policy wraps), and no unit
--   spans two stages: a backward reduce-scatters a flat parameter once each
--   of its parameters has its gradient, and the schedule runs one backward
--   per micro-batch and stage, so a flat parameter holding two stages'
--   (an interleaved rank's) would take a second gradient of one before the
--   other's first. Each micro-batch's forward gathers the units and
--   releases them, its backward gathers them again and reduce-scatters
--   their gradients, which accumulate in the slices over the schedule;
--   finalize, once the schedule is done, divides them by the data-parallel
--   degree dp_shard x dp_replicate (or the items counted), the micro-batch
--   losses scaled as pipelined_loss.lua says, so one process's gradients.
-- - The last stage's own unit is the root: its outputs are the model's
--   (a mixed precision policy's output_dtype applies to them) and it stays
--   gathered through backward. No other unit is: their outputs travel to
--   the next stage.
-- - A tied weight (the embeddings, on the first and last stages' ranks) is
--   a unit alone on each: its one flat parameter is then cut alike on both
--   ranks, the slice of dp_shard rank r covering the same elements, and the
--   ranks of a pp group share their dp_shard rank, so summing the slices
--   over the pp group sums the weight's gradient (pipelined_model.lua's
--   sum_tied_gradients, after finalize); both shards then step alike.
-- - Under the zero-bubble schedule (split backward: stage_runtime.lua) a
--   stage's B runs autograd to its input alone, which reaches no
--   parameter's gradient accumulator, so nothing is reduced there; its
--   units stay gathered after it, but a later forward of theirs (another
--   micro-batch's F before this one's W) releases them, and W's nodes read
--   the weights they saved (their shapes at least). So each W gathers its
--   stage's units again first (weights_back, through the runtime's
--   before_weights), as that unit's forward would; W's gradients then reach
--   the accumulators, whose hooks reduce-scatter each flat parameter once
--   all its gradients are in and release it, as any backward's. The last
--   unit's gather prefetches the unit after it in forward order, if any
--   (another stage's), as a forward's would.
-- - The global norm: each rank's squares of its slices summed over the
--   shard group (the pipeline then sums the stages' over pp); replicas
--   (dp_replicate) hold equal slices, counted once; a tied weight's slice
--   only on the first of its stages' ranks; padding holds zeros. Under
--   tensor parallelism (PP x TP x FSDP) each tp rank shards its own slices
--   of the stages (mesh_sharding.lua), the parameters split over tp in
--   flat parameters of their own, whose squares are summed over tp too.
local core = require("accel.core")
local args = require("accel.util.args")
local wrap_policy = require("accel.parallel.fsdp.wrap_policy")

local pipeline_fsdp = {}

-- The units of pipelined `model`'s stages (PipelinedModel:shard_units),
-- for shard_model.lua; notes which unit holds each tied weight here.
function pipeline_fsdp.units(model, policy)
  local p = model.pipeline
  local alone = {}
  for _, tied in ipairs(p.tied) do
    if tied.here then alone[tied.parameter] = true end
  end
  local units, tied_units, stage_units = {}, {}, {}
  for _, stage in ipairs(p.held) do
    stage_units[stage] = {}
    -- A mixture-of-experts block whose experts FSDP shards runs every
    -- expert in each micro-batch, on no rows too (models/mixtral.lua): a
    -- flat parameter reduce-scatters once each of its parameters has its
    -- gradient (above), and an expert left out of one micro-batch's
    -- backward would leave its unit waiting into the next micro-batch's.
    for _, pair in ipairs(p.stages[stage]:named_modules()) do
      local m = pair[2]
      if type(m.route) == "function" and m.experts ~= nil and rawget(m, "ep") == nil then
        rawset(m, "runs_every_expert", true)
      end
    end
    for j, unit in ipairs(wrap_policy.units(p.stages[stage], policy, alone)) do
      unit.root = j == 1 and stage == p.schedule.stages
      if #unit.params > 0 or unit.root then
        units[#units + 1] = unit
        table.insert(stage_units[stage], #units)
        for i, tied in ipairs(p.tied) do
          if #unit.params == 1 and rawequal(unit.params[1], tied.parameter) then
            if tied_units[i] then
              args.error(string.format("Accelerator:prepare: pp rank %d holds two stages sharing a tied weight, "
                                       .. "which FSDP over dp_shard does not shard yet", p.pp.rank))
            end
            tied_units[i] = #units
          end
        end
      end
    end
  end
  p.tied_units, p.stage_units = tied_units, stage_units
  return units
end

-- For the runtime's before_weights under a split backward (above): the
-- units of `stage` gathered again (a collective over the shard group, which
-- runs the same schedule), in forward order.
function pipeline_fsdp.weights_back(layout, stage)
  for _, unit in ipairs(layout.model.pipeline.stage_units[stage]) do layout.sharded:before_forward(unit) end
end

-- tied weight i -> the index of its flat parameter among the sharded
-- model's shards, for the tied weights held here; found once.
local function tied_flats(layout)
  local p = layout.model.pipeline
  if not p.tied_flats then
    local by_unit = {}
    for k, flat in ipairs(layout.sharded:flat_parameters(layout.optimizer).flats) do
      by_unit[flat.params[1].unit] = k
    end
    p.tied_flats = {}
    for i, unit in pairs(p.tied_units) do p.tied_flats[i] = by_unit[unit] end
  end
  return p.tied_flats
end

-- For PipelinedModel:sum_tied_gradients: part_of(i) gives tied weight i's
-- part here, the shard whose .grad is this rank's slice of its gradient,
-- or nil and zeros of a slice's size where no stage here holds it.
function pipeline_fsdp.tied_parts(layout)
  local flats, shards = tied_flats(layout), layout.sharded:shards()
  local p, dims = layout.model.pipeline, layout.dims
  return function(i)
    if flats[i] then return shards[flats[i]] end
    local w = p.tied[i].parameter
    local slice = math.max(1, math.ceil(w:numel() / dims:shard_count()))
    return nil, core.zeros({ slice }, { dtype = w.dtype, device = dims.device })
  end
end

-- This rank's stages' squared gradient norm over its shard group (a
-- collective over mesh.dp_shard_cp) and, under tensor parallelism (`tp`,
-- the mesh's tp dim, or nil), over tp for the flat parameters holding
-- parameters split over it (the engine keeps those apart: sharded_model.h);
-- the others are equal on every tp rank and counted once. A float32 tensor
-- of one element on the CPU.
function pipeline_fsdp.squares(layout, tp)
  local uncounted = {}
  for i, k in pairs(tied_flats(layout)) do
    if not layout.model.pipeline.tied[i].counted then uncounted[k] = true end
  end
  local flats = layout.sharded:flat_parameters(layout.optimizer).flats
  local device = layout.dims.device
  local whole, split = core.zeros(1, { device = device }), core.zeros(1, { device = device })
  for k, shard in ipairs(layout.sharded:shards()) do
    local g = shard.grad
    if g and not uncounted[k] then
      local sq = g:detach():float():pow(2):sum():to(device):view(1)
      if flats[k].split_over_tp then split = split + sq else whole = whole + sq end
    end
  end
  local sq = core.cat({ whole, split }, 1):contiguous()
  layout.dims.mesh.dp_shard_cp:all_reduce(sq, "sum")
  whole, split = sq:narrow(1, 1, 1), sq:narrow(1, 2, 1):contiguous()
  if tp then tp:all_reduce(split, "sum") end
  return (whole + split):to("cpu")
end

return pipeline_fsdp
