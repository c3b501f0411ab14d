-- accel.parallel.context_parallel(model, mesh): context parallelism over the
-- mesh's cp dim, as torchtitan's context_parallel: every cp rank holds its
-- part of each sequence (context_parallel_layout.lua: its two chunks of the
-- load-balanced layout) and the model's attention becomes ring attention
-- over the cp group (engine/parallel/ring_attention.h), the only place where
-- tokens meet. The architecture's cp_plan (llama.lua: the Llama decoders,
-- llama, mistral, qwen2, mixtral) names the attentions; each gets the
-- ring, and the model's calls are checked: a
-- rank's tokens need their positions in the whole sequence (position_ids),
-- and its labels must be shifted before the sequence was split
-- (shift_labels), since the next token of a chunk's last one lives on
-- another rank. context_parallel_split makes both.
--
-- The loss (context_parallel.loss, model{shift_labels = ...}.loss): rank r's
-- is cp_size x (the sum of its tokens' losses) / (the tokens not ignored in
-- the whole sequence, counted over cp), returned with the value of the mean
-- over the cp ranks, which is the whole sequence's mean: one process's loss.
-- The gradient each rank gets is its own loss's, so that averaging gradients
-- over dp x cp, as the Accelerator does, gives the mean's: the average over
-- cp of cp_size x (each rank's share) is the sum of the shares.
local core = require("accel.core")
local F = core.functional
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local plan = require("accel.parallel.plan")

local context_parallel = {}

local where = "accel.parallel.context_parallel"

-- logits (B, L, V) of this rank's tokens and their shift_labels (B, L), token
-- ids 0-based, -100 ignored. Returns the loss described above (0-dim, float32).
function context_parallel.loss(logits, shift_labels, mesh)
  local cp = mesh.cp
  local labels = shift_labels:reshape(-1)
  local summed = F.cross_entropy(logits:float():reshape(labels:size(1), -1), labels,
                                 { ignore_index = -100, index_base = 0, reduction = "sum" })
  local counted = labels:ne(-100):sum():double():view(1):contiguous()
  cp:all_reduce(counted)
  local mine = summed * (cp.size / counted:item())
  local mean = mine:detach():clone():view(1)
  cp:all_reduce(mean, "mean")
  -- The mean's value, this rank's loss's gradient.
  return mine + (mean:squeeze() - mine:detach())
end

-- Why a model call cannot run over the ring, or nil.
local function refusal(inputs)
  if inputs.past_key_values ~= nil then return "past_key_values: generating is not supported" end
  if inputs.labels ~= nil then
    return "labels: the labels of a split sequence are shifted before splitting; give the shift_labels "
        .. "that accel.parallel.context_parallel_split returns"
  end
  if inputs.position_ids == nil then
    return "position_ids are required: each rank holds two chunks of the sequence; give the position_ids "
        .. "that accel.parallel.context_parallel_split returns"
  end
  local mask = inputs.attention_mask
  if mask ~= nil and mask:eq(0):any():item() then
    return "attention_mask has padding (zeros); context parallelism takes whole sequences only"
  end
end

-- The model's call: checked, shift_labels taken out for the loss, an
-- attention mask of ones dropped (the ring masks causally by itself).
local function wrap_forward(model, mesh)
  local inner = Module.forward_wrapper(model)
  Module.set_forward_wrapper(model, function(m, inputs)
    if type(inputs) ~= "table" then args.error(where .. ": call the model with a table {input_ids = ..., ...}") end
    local why = refusal(inputs)
    if why then args.error(string.format("%s (%s): %s", where, m.__name, why)) end
    local passed = {}
    for k, v in pairs(inputs) do
      if k ~= "shift_labels" and k ~= "attention_mask" then passed[k] = v end
    end
    local out = inner and inner(m, passed) or m:forward(passed)
    if inputs.shift_labels ~= nil then out.loss = context_parallel.loss(out.logits, inputs.shift_labels, mesh) end
    return out
  end)
end

-- The cp plan's kinds (the architectures' cp_plan, llama.lua), each
-- called (name, module, cp group): ring_attention swaps the module's
-- attention (its `attention` method, the seam of llama.lua's) for ring
-- attention over the group; no_sliding_window refuses a layer attending
-- within a window.
local kinds = {
  ring_attention = function(name, m, group)
    if rawget(m, "dropout") > 0 then
      args.error(string.format("%s: %s has attention dropout %g; ring attention has none (set "
                               .. "attention_dropout = 0)", where, name, rawget(m, "dropout")))
    end
    rawset(m, "attention", function(_, q, k, v, _, scale, positions)
      return group:ring_attention(q, k, v, { scale = scale, position_ids = positions })
    end)
    return true
  end,
  no_sliding_window = function(name, m)
    if rawget(m, "window") then
      args.error(string.format("%s: %s attends within a sliding window of %d; ring attention is causal over the "
                               .. "whole sequence only", where, name, rawget(m, "window")))
    end
  end,
}

function context_parallel.apply(model, mesh)
  if not Module.is_module(model) then args.error(where .. ": expected a model (an nn.Module) as argument 1") end
  if not (mesh and mesh.cp) then args.error(where .. ": expected acc.mesh (a device mesh with a cp dim) as argument 2") end
  local cp_plan = model.cp_plan
  local attentions = 0
  if type(cp_plan) == "table" then
    for key, kind in pairs(cp_plan) do
      if not kinds[kind] then
        args.error(string.format("%s: %s's cp_plan entry %s = %s: the kind must be one of %s", where, model.__name,
                                 tostring(key), tostring(kind), plan.kind_names(kinds)))
      end
    end
    plan.each_match(model, cp_plan, function(name, m, kind)
      if kinds[kind](name, m, mesh.cp.group) then attentions = attentions + 1 end
    end)
  end
  if attentions == 0 then
    args.error(string.format("%s: %s has no attention that ring attention replaces (no cp_plan: the Llama "
                             .. "decoders' have one: llama, mistral, qwen2, mixtral)", where,
                             model.__name or "the model"))
  end
  wrap_forward(model, mesh)
  return model
end

return context_parallel
