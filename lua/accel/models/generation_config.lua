-- A folder's generation_config.json, checked field by field when read, as
-- config.json is: a downloaded file's "do_sample": "no" would otherwise turn
-- sampling on (a string is true in Lua), and a string temperature fail deep
-- in generation naming neither file nor key. Keys accel's generate does not
-- read are kept as they are (save_pretrained writes them back).
--   generation_config.read(path) -> the config table
--   generation_config.check_length(model, input_length, max_new, from_call, where)
local args = require("accel.util.args")
local config = require("accel.models.config")

local generation_config = {}

local function is_count(v) return type(v) == "number" and v % 1 == 0 and v >= 0 end
local function is_id_or_ids(v)
  if is_count(v) then return true end
  if type(v) ~= "table" then return false end
  for _, id in ipairs(v) do
    if not is_count(id) then return false end
  end
  return true
end

local function is_number_from_0(v) return type(v) == "number" and v >= 0 end

-- Each field generate reads: its check and what it must be, for the error.
-- Ranges are as loose as released files are (a greedy model's file may say
-- "temperature": 0.0); generate checks what sampling needs when it samples.
local FIELDS = {
  do_sample = { function(v) return type(v) == "boolean" end, "a boolean" },
  temperature = { is_number_from_0, "a number >= 0" },
  top_p = { function(v) return type(v) == "number" and v >= 0 and v <= 1 end, "a number in [0, 1]" },
  top_k = { is_count, "a whole number >= 0" },
  repetition_penalty = { is_number_from_0, "a number >= 0" },
  max_new_tokens = { is_count, "a whole number >= 0" },
  min_new_tokens = { is_count, "a whole number >= 0" },
  max_length = { is_count, "a whole number >= 0" },
  eos_token_id = { is_id_or_ids, "a token id or a list of them" },
  bos_token_id = { is_count, "a token id" },
  pad_token_id = { is_count, "a token id" },
}

local function shown(v)
  if type(v) == "string" then return string.format("the string %q", v) end
  if type(v) == "table" then return "a table" end
  return tostring(v)
end

function generation_config.read(path)
  local g = config.read_file(path)
  local keys = {}
  for key in pairs(FIELDS) do keys[#keys + 1] = key end
  table.sort(keys)
  for _, key in ipairs(keys) do
    local v = g[key]
    if v ~= nil and not FIELDS[key][1](v) then
      args.error(string.format("'%s': %s is %s, expected %s", path, key, shown(v), FIELDS[key][2]))
    end
  end
  return g
end

-- Refuses a max_new_tokens that takes the sequence past the model's
-- positions (max_position_embeddings, GPT-2's n_positions), unless its
-- rope_scaling says it reaches further; `from_call` tells whether the value
-- came from the call or from the model's generation_config.json.
function generation_config.check_length(model, input_length, max_new, from_call, where)
  local cfg = model.config or {}
  local positions = cfg.max_position_embeddings or cfg.n_positions
  if type(positions) ~= "number" or cfg.rope_scaling ~= nil or input_length + max_new <= positions then return end
  local source = from_call and where .. ": max_new_tokens"
                 or string.format("'%s': max_new_tokens", config.source(model.generation_config))
  args.error(string.format("%s %.0f with %d input tokens reaches past the model's %d positions "
                           .. "(max_position_embeddings, and no rope_scaling)", source, max_new, input_length,
                           positions))
end

return generation_config
