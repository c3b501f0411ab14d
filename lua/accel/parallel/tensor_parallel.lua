-- accel.parallel.tensor_parallel(model, mesh[, plan][, {sequence_parallel}]):
-- splits a model's layers over the mesh's tp dim, Megatron-LM's way, as a
-- plan says, the way transformers' base_model_tp_plan does:
--   { ["layers.*.self_attn.q_proj"] = "colwise", ["layers.*.self_attn.o_proj"] = "rowwise",
--     embed_tokens = "vocab_embedding", lm_head = "colwise_gather", ... }
-- A key matches a module whose dotted name is the key or ends with "." ..
-- key, "*" standing for one name part (a layer number). Kinds:
--   colwise          ColwiseLinear, output split on the last dim
--   colwise_gather   ColwiseLinear, output gathered (transformers' colwise_rep)
--   rowwise          RowwiseLinear, input split on the last dim, output summed
--   vocab_embedding  VocabParallelEmbedding (transformers' "rowwise" on an Embedding)
-- and, for sequence parallelism (sequence_parallel.lua: the activations
-- between the regions split over the sequence), "_sequence" marking the
-- side that faces the split sequence:
--   colwise_sequence, colwise_gather_sequence  input all-gathered over the
--                    sequence first (torchtitan's ColwiseParallel(input_layouts=Shard(1)))
--   rowwise_sequence, vocab_embedding_sequence  output reduce-scattered over
--                    the sequence (RowwiseParallel(output_layouts=Shard(1)))
--   sequence_parallel  a norm or dropout on this rank's part of the sequence
--   gather_sequence  a module whose first input is gathered over the
--                    sequence; the colwise linears inside take it as it is
-- The plan defaults to the model's own: model.tp_plan, or model.sp_plan
-- with {sequence_parallel = true} (the pretrained llama carries both); an
-- explicit plan with that option must use the sequence kinds. Every rank
-- must have built the same model (same seed or weights): each keeps its
-- slice of them. Modules are replaced in place (sequence_parallel and
-- gather_sequence keep theirs, wrapping its forward); returns the model. A
-- module with `head_dim` whose colwise children would split a head across
-- ranks is refused, naming the heads and tp_size.
-- A model that acc:build_model built empty under PP x TP (its modules on
-- meta, the slices too) reads this rank's stages' slices from its
-- checkpoint here, at the end (parallel/pipeline/stage_loading.lua).
-- Not yet: tied weights split together (tie_word_embeddings is refused).
local core = require("accel.core")
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local ColwiseLinear = require("accel.parallel.colwise_linear")
local RowwiseLinear = require("accel.parallel.rowwise_linear")
local VocabParallelEmbedding = require("accel.parallel.vocab_parallel_embedding")
local sequence_parallel = require("accel.parallel.sequence_parallel")
local plan_of = require("accel.parallel.plan")
local sorted_keys = require("accel.util.sorted_keys")
local deferred_loading = require("accel.big_modeling.deferred_loading")

local where = "accel.parallel.tensor_parallel"

-- Each kind is called (module, tp, name, sp): sp is the model's shared
-- sequence-parallel state (sequence_parallel.lua), which the sequence kinds keep.
local kinds = {
  colwise = function(m, tp, name) return ColwiseLinear(m, tp, name, false) end,
  colwise_gather = function(m, tp, name) return ColwiseLinear(m, tp, name, true) end,
  rowwise = function(m, tp, name) return RowwiseLinear(m, tp, name) end,
  vocab_embedding = function(m, tp, name) return VocabParallelEmbedding(m, tp, name) end,
  colwise_sequence = function(m, tp, name, sp) return ColwiseLinear(m, tp, name, false, "sequence", sp) end,
  colwise_gather_sequence = function(m, tp, name, sp) return ColwiseLinear(m, tp, name, true, "sequence", sp) end,
  rowwise_sequence = function(m, tp, name, sp) return RowwiseLinear(m, tp, name, sp) end,
  vocab_embedding_sequence = function(m, tp, name, sp) return VocabParallelEmbedding(m, tp, name, sp) end,
  sequence_parallel = sequence_parallel.norm,
  gather_sequence = sequence_parallel.gather_input,
}

local function kind_names()
  return plan_of.kind_names(kinds)
end

local function check_heads(model)
  for _, pair in ipairs(model:named_modules()) do
    local m = pair[2]
    local head_dim = rawget(m, "head_dim")
    if head_dim then
      for _, child in ipairs(m:named_children()) do
        local c = child[2]
        if getmetatable(c) == ColwiseLinear and not c.gather_output and c.out_features % head_dim ~= 0 then
          args.error(string.format("%s: %s.%s has %d heads of %d over tp_size %d: heads must split evenly "
                                   .. "across the tp ranks", where, pair[1], child[1],
                                   c.out_features * c.tp.size / head_dim, head_dim, c.tp.size))
        end
      end
    end
  end
end

-- The ColwiseLinears inside a gather_sequence module take its gathered
-- input as it is (when the forward splits the sequence: `sp`).
local function mark_gathered_inputs(model, sp)
  for _, pair in ipairs(model:named_modules()) do
    if rawget(pair[2], "gathers_sequence") then
      for _, inner in ipairs(pair[2]:named_modules()) do
        local m = inner[2]
        if getmetatable(m) == ColwiseLinear and m.input == "replicated" then
          rawset(m, "input", "gathered")
          rawset(m, "sp", sp)
        end
      end
    end
  end
end

-- Under sequence parallelism a forward recording gradients splits the
-- sequence (sequence_parallel.lua): each rank holds part of the positions,
-- so the model's call refuses logits_to_keep then.
local function refuse_kept_logits(model)
  local inner = Module.forward_wrapper(model)
  Module.set_forward_wrapper(model, function(m, inputs, ...)
    if type(inputs) == "table" and inputs.logits_to_keep ~= nil and core.is_grad_enabled() then
      args.error(m.__name .. ": logits_to_keep while sequence parallelism splits the sequence (a forward recording "
                 .. "gradients): each rank holds part of the positions; leave it out, or run without gradients")
    end
    if inner then return inner(m, inputs, ...) end
    return m:forward(inputs, ...)
  end)
end

return function(model, mesh, plan, options)
  if not Module.is_module(model) then args.error(where .. ": expected a model (an nn.Module) as argument 1") end
  local tp = mesh and mesh.tp
  if not tp then args.error(where .. ": expected acc.mesh (a device mesh with a tp dim) as argument 2") end
  local o = args.options(where, options, { sequence_parallel = false }, { sequence_parallel = "boolean" })
  local plan_field = o.sequence_parallel and "sp_plan" or "tp_plan"
  plan = plan or model[plan_field]
  if type(plan) ~= "table" then
    args.error(string.format("%s: %s has no %s; give a plan {module pattern = kind} (kinds: %s)", where,
                             model.__name or "the model", plan_field, kind_names()))
  end
  local sequence_plan = false
  for _, key in ipairs(sorted_keys(plan)) do
    if type(key) ~= "string" or not kinds[plan[key]] then
      args.error(string.format("%s: plan entry %s = %s: the kind must be one of %s", where, tostring(key),
                               tostring(plan[key]), kind_names()))
    end
    sequence_plan = sequence_plan or plan[key]:find("sequence", 1, true) ~= nil  -- the sequence-parallel kinds
  end
  if o.sequence_parallel and not sequence_plan then
    args.error(where .. ": sequence_parallel = true, but the plan uses none of the sequence-parallel kinds "
               .. "(sequence_parallel, gather_sequence, *_sequence)")
  end
  local config = rawget(model, "config")
  if type(config) == "table" and config.tie_word_embeddings then
    args.error(where .. ": tied input and output embeddings (tie_word_embeddings) are not supported under "
               .. "tensor parallelism yet")
  end
  -- Match on the names as built, then replace: a replaced module's own
  -- children are not visited again.
  local by_name = {}
  for _, pair in ipairs(model:named_modules()) do by_name[pair[1]] = pair[2] end
  local replacements = {}
  local matched = plan_of.each_match(model, plan, function(name, _, kind)
    if replacements[#replacements] and replacements[#replacements].name == name then
      args.error(string.format("%s: %s matches more than one plan entry", where, name))
    end
    replacements[#replacements + 1] = { name = name, kind = kind }
  end)
  for _, key in ipairs(sorted_keys(plan)) do
    if not matched[key] then
      args.error(string.format("%s: plan entry '%s' matches no module of %s", where, key,
                               model.__name or "the model"))
    end
  end
  if tp.size == 1 then return model end
  local sp = sequence_parallel.new_split_flag()
  for _, r in ipairs(replacements) do
    local parent_name, field = r.name:match("^(.*)%.([^.]+)$")
    local parent = by_name[parent_name or ""]
    field = field or r.name
    parent[field] = kinds[r.kind](by_name[r.name], tp, r.name, sp)
  end
  mark_gathered_inputs(model, sp)
  check_heads(model)
  if sequence_plan then refuse_kept_logits(model) end
  -- A model acc:build_model left empty under PP x TP reads its stages now,
  -- each split tensor as this rank's slice (pipeline/stage_loading.lua).
  deferred_loading.finish(model)
  return model
end
