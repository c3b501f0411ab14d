-- Pipeline parallelism in the Accelerator (parallel_dims.lua applies it in
-- prepare_model when the mesh's pp dim has more than one rank): the
-- recipe's model is cut into the schedule's stages and replaced by a
-- PipelinedModel holding this rank's (pipelined_model.lua), which prepare
-- returns; data parallel then applies to that model alone -- its weights
-- broadcast and its gradients averaged over the mesh's dp group, the
-- ranks of the same stages -- through the reducer kept for after the
-- schedule (pipeline_sync.lua), a tied weight's gradient then summed
-- over its stages' ranks (pipelined_model.lua). With dp_shard_size > 1
-- FSDP shards the stages instead (fsdp/fully_shard.lua, which prepare
-- applies next, over the stages' units: pipeline_fsdp.lua), over each
-- stage's dp_shard group, its replicas over dp_replicate (HSDP). A model
-- the recipe made tensor parallel (tensor_parallel.lua, before prepare) is
-- cut as it is, each rank's stages holding its tp slices (PP x TP, and
-- with FSDP PP x TP x FSDP); sequence parallelism is refused. A model
-- whose experts the recipe split over ep (expert_parallel.lua) is cut as
-- it is too (PP x EP, with dp_shard_size = ep_size: FSDP shards each
-- stage's other weights over its dp_shard group, which is its ep group,
-- the experts stay whole and expert_sync.lua synchronises them after the
-- schedule; each stage's blocks exchange their rows over ep inside its
-- forward and backward, both ep ranks running the same schedule). Also
-- here: the sizes and options a pipeline cannot be combined with yet,
-- refused when the Accelerator is made, clipping over the global norm
-- across the stages (and over ep, the experts'), and the refusal of what
-- is not built under a pipeline (join_uneven_inputs; under PP x EP
-- save_state and load_state). A model acc:build_model built for the
-- pipeline holds only this rank's stages' weights (stage_loading.lua);
-- one whose stages are still empty is refused.
local core = require("accel.core")
local clip_to_norm = require("accel.parallel.clip_to_norm")
local args = require("accel.util.args")
local schedules = require("accel.parallel.pipeline.schedules")
local model_stages = require("accel.parallel.pipeline.model_stages")
local sequential_stages = require("accel.parallel.pipeline.sequential_stages")
local PipelinedModel = require("accel.parallel.pipeline.pipelined_model")
local stage_loading = require("accel.parallel.pipeline.stage_loading")
local PipelineSync = require("accel.parallel.pipeline.pipeline_sync")
local data_parallel = require("accel.parallel.data_parallel")
local pipeline_fsdp = require("accel.parallel.pipeline.pipeline_fsdp")
local sequence_parallel = require("accel.parallel.sequence_parallel")
local tp_parameters = require("accel.parallel.tp_parameters")
local same_tensor = require("accel.util.same_tensor")

local pipeline_parallel = {}

-- Refuses, naming the sizes, what pp_size > 1 does not combine with yet;
-- `sharding` is zero_stage's or an fsdp_plugin's settings (or nil).
function pipeline_parallel.check(config, sharding)
  local function refuse(what, why)
    args.error(string.format("accel.Accelerator: pp_size = %d with %s is not implemented yet (%s; "
                             .. "docs/api/parallelism.md): %s", config.pp_size, what, tostring(config), why))
  end
  local combines = "a pipeline combines with dp_replicate_size, dp_shard_size (FSDP), tp_size and ep_size only"
  if config.cp_size > 1 then refuse(string.format("cp_size = %d", config.cp_size), combines) end
  if config.ep_size > 1 then
    -- PP x EP is built with each stage's experts whole on its dp_shard
    -- group (FSDP shards the rest of the stage) and every weight
    -- synchronised over that group alone.
    local what = string.format("ep_size = %d and ", config.ep_size)
    if config.dp_shard_size ~= config.ep_size then
      refuse(what .. string.format("dp_shard_size = %d", config.dp_shard_size), "under a pipeline the experts are "
             .. "split over all of a stage's dp_shard ranks (dp_shard_size = ep_size); sharding them over the ranks "
             .. "holding the same ones is not built there")
    end
    for _, key in ipairs({ "dp_replicate_size", "tp_size" }) do
      if config[key] > 1 then
        refuse(what .. string.format("%s = %d", key, config[key]), "a pipeline with experts split over ep combines "
               .. "with dp_shard_size = ep_size only")
      end
    end
  end
  if sharding and sharding.name ~= "FSDP" then refuse("zero_stage (DeepSpeed)", combines) end
  if sharding and config.dp_shard_size == 1 then
    refuse("an fsdp_plugin and dp_shard_size = 1", "a pipeline's stages are sharded over dp_shard: give "
           .. "dp_shard_size > 1 for FSDP on each stage")
  end
  return schedules.of_config(config)
end

-- The layers of `model` as a pipeline's pieces: an nn.Sequential's, or a
-- pretrained architecture's (model_stages.lua).
local function pieces_of(model)
  if sequential_stages.is(model) then return sequential_stages.of(model) end
  local model_type = model_stages.model_type(model)
  local cut = model_stages.cut(model)
  if model_type and not cut then
    args.error(string.format("Accelerator:prepare: pp_size > 1 cuts the causal LMs of model_type %s into stages; "
                             .. "a %s (model_type %s) is not cut yet", model_stages.known(), model.__name,
                             tostring(model_type)))
  end
  if cut then return cut.of(model, { tied = true }) end
  args.error(string.format("Accelerator:prepare: pp_size > 1 cuts a causal LM (model_type %s) or an nn.Sequential "
                           .. "into stages; a %s is neither", model_stages.known(), tostring(model and model.__name)))
end

function pipeline_parallel.applies(dims)
  return dims:pp() ~= nil
end

-- The recipe's optimizer was made over the whole model's parameters: each
-- group keeps this rank's stages' only, so that the other stages' weights
-- (never given a gradient here) are not held alive by it.
local function keep_stage_parameters(optimizer, model)
  local by_shape = {}
  for _, p in ipairs(model:parameters()) do
    local shape = table.concat(p:size(), "x")
    by_shape[shape] = by_shape[shape] or {}
    table.insert(by_shape[shape], p)
  end
  for g = 1, optimizer:num_param_groups() do
    local kept = {}
    for _, p in ipairs(optimizer:params(g)) do
      for _, mine in ipairs(by_shape[table.concat(p:size(), "x")] or {}) do
        if same_tensor(p, mine) then
          kept[#kept + 1] = p
          break
        end
      end
    end
    optimizer:replace_params(g, kept)
  end
end

function pipeline_parallel.apply(layout, dims, optimizer)
  local config = dims.mesh.config
  -- Under sequence parallelism the hidden states between the tp regions
  -- are split over the sequence, and a stage would be handed part of the
  -- positions: its rotary angles and causal mask come from its input's
  -- length (decoder_stages.lua), and the split is set by the embedding,
  -- which runs on the first stage's ranks alone.
  local sp = sequence_parallel.applied(layout.model)
  if sp then
    args.error(string.format("Accelerator:prepare: pp_size = %d with sequence parallelism (tensor_parallel's "
                             .. "sequence_parallel = true; %s splits the sequence) is not implemented yet: a "
                             .. "pipeline's stages pass whole sequences; apply tensor_parallel without it "
                             .. "(docs/api/parallelism.md)", config.pp_size, sp))
  end
  if dims:ep() then require("accel.parallel.expert_sync").refuse_unsplit(layout.model, dims) end
  local schedule = schedules.of_config(config)
  layout.model = PipelinedModel(pieces_of(layout.model), schedule, dims.mesh.pp, layout.model)
  stage_loading.refuse_empty(layout.model, config)
  if optimizer then keep_stage_parameters(optimizer, layout.model) end
  layout.pipelined = true
  local model = layout.model
  if dims.sharding then
    -- fully_shard applies next; its sharded model reduces every backward,
    -- each micro-batch's, and is the gradient synchronisation.
    layout.after_sync = function() model:sum_tied_gradients(pipeline_fsdp.tied_parts(layout)) end
    -- W actions compute with the weights, which FSDP may have released since B.
    if schedule.split_backward then
      model.pipeline.before_weights = function(stage) pipeline_fsdp.weights_back(layout, stage) end
    end
    return
  end
  data_parallel.apply(layout, dims)
  layout.sync = PipelineSync.new(layout.sync)
  layout.after_sync = function() model:sum_tied_gradients() end
end

-- The squared norm of this rank's stages' gradients (non-sharded: the dp
-- ranks of a stage hold the same once synchronised), a tied weight counted
-- on the first of its ranks only; under tensor parallelism (`tp`, or nil)
-- the split parameters' squares summed over the tp group, the whole ones
-- (equal on every tp rank) counted once, as tp_parameters.grad_norm does.
-- A float32 tensor of one element on the CPU.
local function stage_squares(layout, tp)
  local device = layout.dims.device
  local whole, split = core.zeros(1, { device = device }), core.zeros(1, { device = device })
  for _, entry in ipairs(tp_parameters.list(layout.model)) do
    local g = entry[2].grad
    if g and layout.model:counts_in_norm(entry[2]) then
      local sq = g:detach():float():pow(2):sum():view(1)
      if entry[3] then split = split + sq else whole = whole + sq end
    end
  end
  if tp then
    split = split:contiguous()
    tp:all_reduce(split, "sum")
  end
  return (whole + split):to("cpu")
end

-- The squared norm of the experts' gradients this rank's stages hold
-- (split over ep: expert_sync.lua's, whole), summed over `ep` (the stage's
-- ep group: each of its ranks holds other experts of the same layers). A
-- collective over ep, on every rank, also one whose stages hold no experts
-- (its ep group's ranks hold the same stages, so none).
local function expert_squares(layout, ep)
  local sq = core.zeros(1)
  for _, p in ipairs(layout.expert_sync.params) do
    if p.grad then sq = sq + p.grad:detach():float():pow(2):sum():to("cpu"):view(1) end
  end
  sq = sq:contiguous()
  ep:all_reduce(sq, "sum")
  return sq
end

-- torch.nn.utils.clip_grad_norm_ over the global norm of the prepared
-- pipelined models (`layouts`), whatever parameters the recipe lists: each
-- rank's stages' squares summed over the pp group, under FSDP each stage's
-- slices' squares summed over its shard group first (pipeline_fsdp.lua),
-- under TP (`tp`, the mesh's tp dim, or nil) the split parameters' over
-- tp, under EP (`ep`, or nil) the experts' over ep (FSDP leaves them out
-- of its slices), so that every weight is counted once. Returns the norm, a
-- 0-dim tensor, on every rank.
function pipeline_parallel.clip_grad_norm(layouts, max_norm, norm_type, pp, tp, ep)
  if norm_type ~= nil and norm_type ~= 2 then
    args.error("Accelerator:clip_grad_norm: through a pipeline only the L2 norm (norm_type 2) is supported yet")
  end
  local sq = core.zeros(1)
  local holders = {}
  for _, layout in ipairs(layouts) do
    if layout:reduces_every_backward() then
      sq = sq + pipeline_fsdp.squares(layout, tp)
    else
      sq = sq + stage_squares(layout, tp)
    end
    if ep then sq = sq + expert_squares(layout, ep) end
    for _, t in ipairs(layout:gradient_holders()) do holders[#holders + 1] = t end
  end
  sq = sq:contiguous()
  pp:all_reduce(sq, "sum")
  return clip_to_norm(holders, max_norm, sq:sqrt():squeeze())
end

-- Why each Accelerator method refused under a pipeline is not built there.
local NOT_BUILT = {
  join_uneven_inputs = "a rank out of batches cannot stand in for its stage in the schedule",
}

-- What is not built under a pipeline, refused by `action` on every rank alike.
function pipeline_parallel.refuse(dims, action)
  args.error(string.format("Accelerator:%s under pp_size = %d is not implemented yet: %s (%s; "
                           .. "docs/api/parallelism.md)", action, dims.mesh.pp.size, NOT_BUILT[action],
                           tostring(dims.mesh.config)))
end

-- What is not built under a pipeline whose stages' experts are split
-- over ep (PP x EP), refused by `action` on every rank alike.
function pipeline_parallel.refuse_with_experts(dims, action)
  args.error(string.format("Accelerator:%s under pp_size = %d with ep_size = %d is not implemented yet: a "
                           .. "pipeline's checkpoint names each rank's stages' tensors, not the experts its ep "
                           .. "ranks hold apart (%s; docs/api/parallelism.md)", action, dims.mesh.pp.size,
                           dims.mesh.ep.size, tostring(dims.mesh.config)))
end

return pipeline_parallel
