-- model:generate(input_ids, {attention_mask, max_new_tokens = 20, min_new_tokens,
--   do_sample, temperature, top_k, top_p, repetition_penalty, eos_token_id,
--   pad_token_id}) -> (B, T + new) int64 token ids
-- Autoregressive decoding with a key/value cache, as transformers' generate:
-- the prompt (left-padded in a batch, with its attention_mask) runs once,
-- then one token per step; each row's positions count its own tokens. The
-- logits of the last position go through the repetition penalty, then, when
-- sampling, temperature, top-k and top-p, in that order; greedy decoding
-- takes the first largest logit (so its tokens equal transformers'). A row
-- that produced an eos token is padded with pad_token_id from then on, and
-- decoding stops when every row has. Defaults come from the folder's
-- generation_config.json (model.generation_config), then the model's config,
-- then transformers' (top_k 50 when sampling).
-- A model that computes its logits otherwise (a pipeline's stages:
-- parallel/pipeline/pipelined_model.lua) passes `through`: {config,
-- generation_config (the defaults' sources), next_logits(ids) -> the (B, V)
-- logits of ids' last position (ids: the prompt and the tokens so far),
-- agree(tokens) -> the (B) tokens every rank takes}; no cache is kept then.
local core = require("accel.core")
local F = core.functional
local args = require("accel.util.args")
local generation_config = require("accel.models.generation_config")
local KVCache = require("accel.models.kv_cache")
local attention_mask = require("accel.models.attention_mask")

local generation = {}

local option_defaults = {
  attention_mask = args.NONE, max_new_tokens = args.NONE, min_new_tokens = 0, do_sample = args.NONE,
  temperature = args.NONE, top_k = args.NONE, top_p = args.NONE, repetition_penalty = args.NONE,
  eos_token_id = args.NONE, pad_token_id = args.NONE, streamer = args.NONE,
}
local option_types = {
  attention_mask = "userdata", max_new_tokens = "number", min_new_tokens = "number", do_sample = "boolean",
  temperature = "number", top_k = "number", top_p = "number", repetition_penalty = "number",
  eos_token_id = "number|table", pad_token_id = "number", streamer = "table",
}

-- An option, else generation_config.json's, else config.json's, else `fallback`.
local function setting(o, model, key, fallback)
  if o[key] ~= nil then return o[key] end
  local g = model.generation_config
  if g and g[key] ~= nil then return g[key] end
  if model.config and model.config[key] ~= nil and (key == "eos_token_id" or key == "pad_token_id") then
    return model.config[key]
  end
  return fallback
end

local function id_list(v)
  if v == nil then return {} end
  if type(v) == "number" then return { v } end
  return v
end

-- transformers' RepetitionPenaltyLogitsProcessor: every id seen (prompt
-- included) has its logit divided by the penalty, or multiplied when negative.
local function penalize(scores, ids, penalty)
  local index = ids + 1  -- gather and scatter take 1-based indices
  local seen = scores:gather(2, index)
  seen = core.where(seen:lt(0), seen * penalty, seen / penalty)
  return scores:scatter(2, index, seen)
end

local function keep_top_k(scores, k)
  k = math.min(math.max(k, 1), scores:size(-1))
  local values = scores:topk(k, -1)
  local threshold = values:narrow(-1, k, 1)
  return scores:masked_fill(scores:lt(threshold), -math.huge)
end

-- Keeps the smallest set of tokens whose probabilities reach top_p (at least one).
local function keep_top_p(scores, p)
  local sorted, order = scores:sort(-1, false)
  local cumulative = F.softmax(sorted, -1):cumsum(-1)
  local drop = cumulative:le(1 - p)
  local V = scores:size(-1)
  drop = core.cat({ drop:narrow(-1, 1, V - 1), core.zeros({ scores:size(1), 1 }, { dtype = "bool",
                                                                                  device = scores.device }) }, -1)
  return scores:masked_fill(drop:scatter(-1, order, drop), -math.huge)
end

-- Where the ids go: the device of the first weight in memory (a model
-- dispatched with a device map keeps its offloaded parts on the meta device
-- and moves inputs to each part's device itself).
local function input_device(model)
  for _, p in ipairs(model:parameters()) do
    if p.device ~= "meta" then return p.device end
  end
  return "cpu"
end

function generation.generate(model, input_ids, options, through)
  local where = model.__name .. ":generate"
  local source = through and { config = through.config, generation_config = through.generation_config } or model
  local o = args.options(where, options, option_defaults, option_types)
  if type(input_ids) ~= "userdata" or input_ids:dim() ~= 2 or input_ids:is_floating_point() then
    args.error(string.format("%s: input_ids must be an integer (batch, sequence) tensor of token ids, got %s", where,
                             type(input_ids) == "userdata" and (input_ids.dtype .. " " .. args.shape(input_ids))
                             or type(input_ids)))
  end
  local B, T = input_ids:size(1), input_ids:size(2)
  local max_new = setting(o, source, "max_new_tokens", 20)
  local min_new = o.min_new_tokens
  local do_sample = setting(o, source, "do_sample", false)
  local temperature = setting(o, source, "temperature", 1)
  local top_k = setting(o, source, "top_k", 50)
  local top_p = setting(o, source, "top_p", 1)
  local penalty = setting(o, source, "repetition_penalty", 1)
  local eos = id_list(setting(o, source, "eos_token_id", nil))
  local pad = setting(o, source, "pad_token_id", nil) or eos[1]
  for key, v in pairs({ max_new_tokens = max_new, min_new_tokens = min_new }) do
    if v % 1 ~= 0 or v < 0 then args.error(string.format("%s: %s must be a whole number >= 0, got %s", where, key, v)) end
  end
  generation_config.check_length(source, T, max_new, o.max_new_tokens ~= nil, where)
  if not (temperature > 0) then args.error(where .. ": temperature must be positive, got " .. temperature) end
  if not (top_p > 0 and top_p <= 1) then args.error(where .. ": top_p must be in (0, 1], got " .. top_p) end
  if not (penalty > 0) then args.error(where .. ": repetition_penalty must be positive, got " .. penalty) end

  local device = input_device(model)
  local ids = input_ids:long():to(device)
  local mask = o.attention_mask and o.attention_mask:long():to(device) or core.ones({ B, T }, { dtype = "int64", device = device })
  if mask:size(1) ~= B or mask:size(2) ~= T then
    args.error(string.format("%s: attention_mask must have input_ids' shape (%d, %d), got %s", where, B, T,
                             args.shape(mask)))
  end
  local eos_ids = #eos > 0 and core.tensor(eos, { dtype = "int64", device = device }) or nil
  local unfinished = core.ones({ B }, { dtype = "int64", device = device })
  local cache = not through and KVCache() or nil
  local next_logits = through and through.next_logits or function(_, step_ids, step_mask, positions)
    local out = model{ input_ids = step_ids, attention_mask = step_mask, position_ids = positions,
                       past_key_values = cache, logits_to_keep = 1 }
    return out.logits:select(2, 1)
  end
  -- transformers' streamer: put(prompt ids), put(each step's new ids), end().
  local streamer = o.streamer
  if streamer and (type(streamer.put) ~= "function" or type(streamer["end"]) ~= "function") then
    args.error(where .. ": streamer must have put(ids) and end() methods, as accel.tokenizers.TextStreamer")
  end
  if streamer then streamer:put(ids) end
  local was_training = model.training
  model:eval()
  local ok, result = pcall(core.no_grad, function()
    local step_ids, positions = ids, attention_mask.positions(mask)
    for step = 1, max_new do
      local scores = next_logits(ids, step_ids, mask, positions):float()
      if penalty ~= 1 then scores = penalize(scores, ids, penalty) end
      if eos_ids and step <= min_new then
        scores = scores:index_fill(2, eos_ids + 1, -math.huge)
      end
      local next_tokens
      if do_sample then
        if temperature ~= 1 then scores = scores / temperature end
        if top_k and top_k > 0 then scores = keep_top_k(scores, top_k) end
        if top_p < 1 then scores = keep_top_p(scores, top_p) end
        next_tokens = F.softmax(scores, -1):multinomial(1):view(B) - 1
      else
        next_tokens = scores:argmax(-1) - 1
      end
      if through then next_tokens = through.agree(next_tokens) end
      if eos_ids then next_tokens = next_tokens * unfinished + (unfinished:neg() + 1) * pad end
      step_ids = next_tokens:view(B, 1)
      if streamer then streamer:put(step_ids) end
      ids = core.cat({ ids, step_ids }, 2)
      mask = core.cat({ mask, core.ones({ B, 1 }, { dtype = "int64", device = device }) }, 2)
      positions = positions:narrow(2, positions:size(2), 1) + 1
      if eos_ids then
        local hit = step_ids:eq(eos_ids:view(1, -1)):any(2):view(B)
        unfinished = unfinished * hit:logical_not():long()
        if unfinished:max():item() == 0 then break end
      end
    end
    return ids
  end)
  model:train(was_training)
  if not ok then error(result, 0) end
  if streamer then streamer["end"](streamer) end
  return result
end

return generation
