-- What acc:prepare returns for a model under pp_size > 1
-- (pipeline_parallel.lua): a module holding this pp rank's stages (cut from
-- the recipe's model by stage_runtime.build_stages), called as the model
-- was, with the labels, since the last stage computes the loss:
--   local out = model{ input_ids = x, labels = x }   -- a causal LM (model_stages.lua)
--   local out = model{ input = x, labels = y }        -- an nn.Sequential (sequential_stages.lua)
-- In training (model.training, gradients on) the call defers the work:
-- out.loss stands for the loss (pipelined_loss.lua) and acc:backward(out.loss)
-- runs the schedule over pp_microbatches slices of the batch, after which
-- out.loss holds the batch's loss on every pp rank; out holds the loss only.
-- In evaluation (model:eval(), or under accel.no_grad) the labels are
-- optional and out is read lazily: out.loss runs the schedule's forwards
-- alone; out.logits (a Sequential's out.output) runs them keeping the last
-- stage's outputs, which every pp rank then holds (broadcast from the last
-- stage's: under TP with a vocabulary-parallel head the tp rank's slice,
-- as one process's), and sets out.loss too when labels were given (read
-- logits first for one run). model:generate(input_ids, options) is the
-- models' generate (accel.models.generation) through the stages:
--   local ids = model:generate(prompt, { max_new_tokens = 8 })   -- every pp rank, alike
-- Every pp rank calls it with the same prompt and options (each step is
-- a forward-only schedule over the pp group) and gets the same tokens.
--
-- Decisions:
-- - Every pp rank is given the whole batch (the pp ranks of a mesh see the
--   same batches, the loader shards over dp); stage 1 reads the input, the
--   last stage the labels.
-- - A causal LM's loss is token-weighted: each micro-batch's is its share
--   of the batch's (the sum of its tokens' losses over the batch's count of
--   labels that are not -100, or num_items_in_batch when given), so labels
--   ignored unevenly over the micro-batches still give one process's loss.
--   A Sequential's loss_fn gives a micro-batch's mean (equal slices).
-- - The schedule's runtime is made at the first call, once prepare has put
--   the stages on their device (their inputs arrive there).
-- - Tied embeddings (pieces.tied): the one weight sits in the first stage's
--   embeddings (embed_tokens, GPT-2's wte) and the last stage's lm_head,
--   on two ranks, each holding its copy (every rank built the whole
--   model, or both read that weight: stage_loading.lua). Once a step's
--   gradients are synchronised, sum_tied_gradients sums its gradient
--   over the pp group (the ranks without it add zeros),
--   so both copies take one process's gradient and step alike; the global
--   norm counts it on the first of its ranks only (counts_in_norm). Under
--   FSDP on each stage its gradient is in slices, summed alike
--   (pipeline_fsdp.lua).
-- - Under FSDP (dp_shard_size > 1) shard_model.lua cuts the stages into
--   units by shard_units (pipeline_fsdp.lua): none spans two stages.
--   Under the zero-bubble schedule the runtime calls
--   pipeline.before_weights (set by pipeline_parallel.lua) before each W,
--   which gathers that stage's units again.
-- - generate keeps no key/value cache: each new token runs the whole
--   sequence so far through the stages (a schedule of forwards keeping the
--   last position's logits), the stages taking ids alone (no padding:
--   an attention_mask with zeros is refused). A batch that does not cut
--   into pp_microbatches rows is filled with copies of its last row (rows
--   are independent) and those rows' tokens dropped. The tokens are the
--   last stage's rank's, broadcast over the pp group, so that sampling
--   (each rank's own generator) agrees; greedy tokens are one process's.
--   A vocabulary-parallel head (each tp rank a slice of the logits) is
--   refused: its tokens would come from a slice.
-- - Checkpoints speak the whole model's names (parallel/checkpoint/
--   pipeline_checkpoint.lua): at init each of this rank's tensors is found
--   by identity among the whole model's state dict and its name kept
--   (whole_names), with the whole model's names in the order save_model
--   writes them and its parameters' names in parameters() order (strings
--   only: the other stages' modules are not kept).
local core = require("accel.core")
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")
local stage_cut = require("accel.parallel.pipeline.stage_cut")
local pipelined_loss = require("accel.parallel.pipeline.pipelined_loss")
local pipeline_fsdp = require("accel.parallel.pipeline.pipeline_fsdp")
local same_tensor = require("accel.util.same_tensor")
local expert_parameters = require("accel.parallel.expert_parameters")
local generation = require("accel.models.generation")

local PipelinedModel = Module:extend("PipelinedModel")

local where = "accel.parallel.pipeline"

-- The whole model's names: {stage = this model's state-dict key -> the
-- whole model's, order = the whole model's state-dict names as save_model
-- orders them, parameters = its parameters' names in parameters() order,
-- experts = its blocks whose experts are split over ep
-- (expert_parameters.layout; empty for most), whole_order = order with
-- every expert of those (order names this ep rank's alone)}.
local function whole_names(self, whole)
  local state, by_shape = whole:state_dict(), {}
  for name, t in pairs(state) do
    local shape = table.concat(t:size(), "x")
    by_shape[shape] = by_shape[shape] or {}
    table.insert(by_shape[shape], { name, t })
  end
  local out = { stage = {}, order = {}, parameters = {} }
  for key, t in pairs(self:state_dict()) do
    for _, entry in ipairs(by_shape[table.concat(t:size(), "x")] or {}) do
      if same_tensor(t, entry[2]) then out.stage[key] = entry[1] end
    end
    if not out.stage[key] then
      args.error(string.format("%s: the stages' tensor %q is none of the model's (its state dict)", where, key))
    end
  end
  for _, pair in ipairs(require("accel.util.named_tensors")(whole)) do
    if state[pair[1]] then out.order[#out.order + 1] = pair[1] end
  end
  for name in whole:named_parameters() do out.parameters[#out.parameters + 1] = name end
  -- Experts split over ep (expert_parallel.lua): the whole model's blocks,
  -- whose other experts the full weights gather from the ep ranks, and
  -- save_model's order with every expert.
  out.experts = expert_parameters.layout(whole)
  out.whole_order = expert_parameters.whole_names(out.experts, out.order)
  return out
end

-- pieces: {layer_names, build, loss_fn, input_key, output_key [,
-- loss_share, logits_split]}; schedule and pp (the mesh's pp dim) from
-- pipeline_parallel.lua; `whole`: the model cut (its names, config and
-- generation_config only are kept).
function PipelinedModel:init(pieces, schedule, pp, whole)
  local stages = stage_runtime.build_stages{ layer_names = pieces.layer_names, build = pieces.build,
                                             schedule = schedule, pp_rank = pp.rank }
  local held = {}
  for stage = 1, schedule.stages do
    if stages[stage] then
      self["stage_" .. stage] = stages[stage]
      held[#held + 1] = stage
    end
  end
  -- Not pieces.build, which reaches the whole model: once prepare returns,
  -- the other stages' modules are the recipe's to drop.
  local kept = { loss_fn = pieces.loss_fn, loss_share = pieces.loss_share, input_key = pieces.input_key,
                 output_key = pieces.output_key or "logits", logits_split = pieces.logits_split }
  rawset(self, "pipeline", { pieces = kept, schedule = schedule, pp = pp, stages = stages, held = held, tied = {},
                             config = whole.config, generation_config = whole.generation_config })
  self.pipeline.names = whole_names(self, whole)
  -- Where each tied weight's layers are: the pp ranks of their stages,
  -- and each pp rank's layers, in layer_names' order (a checkpoint's cut).
  local rank_of, by_rank = {}, {}
  for stage, names in ipairs(stage_cut.split(pieces.layer_names, { stages = schedule.stages })) do
    local r = schedule.placement[stage]
    by_rank[r + 1] = by_rank[r + 1] or {}
    for _, name in ipairs(names) do
      rank_of[name] = r
      table.insert(by_rank[r + 1], name)
    end
  end
  self.pipeline.layers_by_rank = by_rank
  for _, group in ipairs(pieces.tied or {}) do
    local first, here = math.huge, false
    for _, name in ipairs(group.names) do
      first = math.min(first, rank_of[name])
      here = here or rank_of[name] == pp.rank
    end
    table.insert(self.pipeline.tied, { parameter = group.parameter, here = here, counted = first == pp.rank })
  end
end

-- Sums each tied weight's gradient over the pp group (call on every pp
-- rank, once per synchronised step). Without `part_of` the gradient is the
-- weight's own; part_of(i) (FSDP: pipeline_fsdp.tied_parts) gives the
-- tensor whose .grad holds tied weight i's part on this rank, or nil and
-- zeros of that part's size where it is not here.
function PipelinedModel:sum_tied_gradients(part_of)
  local p = self.pipeline
  for i, tied in ipairs(p.tied) do
    local w = tied.parameter
    local holder, zeros = tied.here and w or nil, nil
    if part_of then holder, zeros = part_of(i) end
    local g = holder and holder.grad
    local sum = g and g:detach():clone() or zeros or core.zeros(w:size(), { dtype = w.dtype, device = w.device })
    p.pp:all_reduce(sum, "sum")
    if holder then
      if g then core.no_grad(function() g:copy_(sum) end) else holder.grad = sum end
    end
  end
end

-- FSDP's units of this rank's stages (shard_model.lua), none spanning two.
function PipelinedModel:shard_units(policy)
  return pipeline_fsdp.units(self, policy)
end

-- Whether the global norm counts parameter `w` on this rank (a tied
-- weight's gradient only on the first of its ranks).
function PipelinedModel:counts_in_norm(w)
  for _, tied in ipairs(self.pipeline.tied) do
    if rawequal(tied.parameter, w) then return tied.counted end
  end
  return true
end

-- The layer names this rank's stages hold, in order ({"layers.1", "norm", ...}).
function PipelinedModel:layer_names()
  local out = {}
  for _, stage in ipairs(self.pipeline.held) do
    for _, name in ipairs(self.pipeline.stages[stage].pipeline_layer_names) do out[#out + 1] = name end
  end
  return out
end

-- The stages' forwards and the loss run under fn (the Accelerator's autocast).
function PipelinedModel:_set_autocast(fn)
  self.pipeline.autocast = fn
end

local function runtime(self)
  local p = self.pipeline
  if not p.runtime then
    p.runtime = stage_runtime.new{ group = p.pp.group, schedule = p.schedule, stages = p.stages,
                                   loss_fn = p.pieces.loss_fn, before_weights = p.before_weights }
  end
  return p.runtime
end

-- Runs the schedule on the batch; returns its loss on every pp rank (nil
-- without labels), and with `outputs` (forward-only) what it keeps of the
-- last stage's outputs (stage_runtime's step).
local function run(self, x, labels, num_items, backward, scale_loss, outputs)
  local p = self.pipeline
  local options = { backward = backward, scale_loss = scale_loss, autocast = p.autocast, outputs = outputs }
  if p.pieces.loss_share and labels ~= nil then
    options.loss_fn, options.loss_reduction = p.pieces.loss_share(labels, num_items), "sum"
  end
  return runtime(self):step(x, labels, options)
end

local function whole_output(y) return y end

local function refuse_field(key, output_key)
  args.error(string.format("%s: a pipelined model's output holds only loss in training (its %s stay in the last "
                           .. "stage's micro-batches; out.%s is read in evaluation: model:eval() or accel.no_grad)",
                           where, tostring(key), output_key))
end

function PipelinedModel:forward(inputs, ...)
  local p = self.pipeline
  local key = p.pieces.input_key
  if type(inputs) ~= "table" or core.is_tensor(inputs) or select("#", ...) > 0 then
    args.error(string.format("%s: a pipelined model is called with one table {%s = ..., labels = ...}", where, key))
  end
  for k in pairs(inputs) do
    if k ~= key and k ~= "labels" and not (k == "num_items_in_batch" and p.pieces.loss_share) then
      args.error(string.format("%s: a pipelined model takes %s and labels%s, not %s (its stages pass one tensor "
                               .. "between them)", where, key, p.pieces.loss_share and " (and num_items_in_batch)" or "",
                               tostring(k)))
    end
  end
  local x, labels, num_items = inputs[key], inputs.labels, inputs.num_items_in_batch
  local training = self.training and core.is_grad_enabled()
  if x == nil or (labels == nil and training) then
    args.error(string.format("%s: a pipelined model needs %s and labels: the last stage computes the loss (in "
                             .. "evaluation, model:eval() or accel.no_grad, %s alone gives out.%s)", where, key, key,
                             p.pieces.output_key))
  end
  if p.waiting and pipelined_loss.is_pending(p.waiting) then
    args.error(string.format("%s: the previous batch's out.loss was never given to acc:backward: in training a "
                             .. "pipelined model runs each batch's forwards and backwards together, in "
                             .. "acc:backward(out.loss); for a loss without gradients call model:eval() or run "
                             .. "under accel.no_grad", where))
  end
  local output_key = p.pieces.output_key
  if training then
    local loss = pipelined_loss.defer(function(scale_loss) return run(self, x, labels, num_items, true, scale_loss) end)
    p.waiting = loss
    return setmetatable({ loss = loss }, { __index = function(_, k) refuse_field(k, output_key) end })
  end
  -- Lazily, on first reading: a loss alone broadcasts a number, the
  -- outputs the whole batch's.
  return setmetatable({}, { __index = function(t, k)
    if k == output_key then
      local loss, y = run(self, x, labels, num_items, false, nil, whole_output)
      if loss and rawget(t, "loss") == nil then rawset(t, "loss", loss) end
      rawset(t, k, y)
      return y
    end
    if k ~= "loss" then
      args.error(string.format("%s: a pipelined model's output holds loss and %s only, not %s", where, output_key,
                               tostring(k)))
    end
    if labels == nil then
      args.error(string.format("%s: out.loss needs labels (the model was called with %s alone)", where, key))
    end
    local loss = run(self, x, labels, num_items, false)
    rawset(t, "loss", loss)
    return loss
  end })
end

-- accel.models' generate through the stages (above); every pp rank calls
-- it alike. Options as the model's own generate (accel.models.generation).
function PipelinedModel:generate(input_ids, options)
  local p = self.pipeline
  local name = where .. ": PipelinedModel:generate"
  if p.pieces.input_key ~= "input_ids" then
    args.error(string.format("%s: generating needs a causal LM cut into stages; this pipeline's model takes %s", name,
                             p.pieces.input_key))
  end
  if p.pieces.logits_split then
    args.error(name .. ": lm_head is vocabulary-parallel (tensor_parallel's \"colwise\": each tp rank holds a slice "
               .. "of the logits); generate through a pipeline needs the whole logits (\"colwise_gather\", llama's "
               .. "own plan)")
  end
  local mask = type(options) == "table" and options.attention_mask
  if core.is_tensor(mask) and mask:numel() > 0 and mask:min():item() == 0 then
    args.error(name .. ": attention_mask has zeros (padding): a pipeline's stages take whole sequences of ids "
               .. "(no padding mask travels between them)")
  end
  local m, last_rank = p.schedule.microbatches, p.schedule.placement[p.schedule.stages]
  local function last_position(y) return y:narrow(2, y:size(2), 1) end
  return generation.generate(self, input_ids, options, {
    config = p.config, generation_config = p.generation_config,
    next_logits = function(ids)
      local B = ids:size(1)
      local rows = math.ceil(B / m) * m
      if rows > B then ids = core.cat({ ids, ids:narrow(1, B, 1):expand(rows - B, ids:size(2)) }, 1) end
      local _, last = run(self, ids, nil, nil, false, nil, last_position)
      return last:narrow(1, 1, B):select(2, 1)
    end,
    agree = function(tokens)
      tokens = tokens:contiguous()
      p.pp:broadcast(tokens, last_rank)
      return tokens
    end,
  })
end

return PipelinedModel
