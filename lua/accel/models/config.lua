-- A model's configuration: config.json of a Hugging Face folder, or a Lua
-- table in transformers' keys. Values read as Lua values; JSON null reads
-- as absent (nil), as Python's None is, and is remembered so that
-- save_pretrained writes it back (a null sliding_window is not the same as
-- a missing one, whose default transformers would fill in).
--   local cfg = config.read(dir)              -- dir/config.json
--   local cfg = config.from_table(t, where)
--   config.to_json(cfg) -> text
local core = require("accel.core")
local args = require("accel.util.args")

local config = {}

local null = core.json.null
local nulls_of = setmetatable({}, { __mode = "k" })  -- config -> {key = true} read as null
local floats_of = setmetatable({}, { __mode = "k" })  -- config -> {key = true} read as decimals

-- Keys transformers' configs declare as floats, written as decimals (0.0, not
-- 0) even when a default or a Lua table set them: transformers 5 refuses an
-- integer there.
local float_keys = {
  "rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon", "initializer_range", "rope_theta", "attention_dropout",
  "hidden_dropout_prob", "attention_probs_dropout_prob", "resid_pdrop", "embd_pdrop", "attn_pdrop",
  "summary_first_dropout", "router_aux_loss_coef", "router_jitter_noise", "partial_rotary_factor", "factor",
  "low_freq_factor", "high_freq_factor", "attention_factor", "beta_fast", "beta_slow", "llm_int8_threshold",
}
local sources = setmetatable({}, { __mode = "k" })   -- config -> "dir/config.json", for messages

-- A copy of `t` with nulls dropped (recursively) and recorded at the top level.
local function without_nulls(t, nulls)
  local out = {}
  for k, v in pairs(t) do
    if v == null then
      if nulls then nulls[k] = true end
    elseif type(v) == "table" then
      out[k] = without_nulls(v)
    else
      out[k] = v
    end
  end
  return out
end

-- `floats`: the keys json.read found holding decimals.
function config.from_table(t, where, floats)
  if type(t) ~= "table" then args.error(string.format("%s: a config must be a table, got a %s", where, type(t))) end
  local nulls = {}
  local cfg = without_nulls(t, nulls)
  nulls_of[cfg], sources[cfg], floats_of[cfg] = nulls, where, floats or {}
  return cfg
end

-- A JSON file of settings (config.json, generation_config.json).
function config.read_file(path)
  local ok, t, floats = pcall(core.json.read, path, 16 * 1024 * 1024)
  if not ok then error(tostring(t), 0) end  -- the binding's message already names the recipe line
  return config.from_table(t, path, floats)
end

function config.read(dir)
  return config.read_file(dir .. "/config.json")
end

function config.is_folder(path)
  return type(path) == "string" and core.formats.is_folder(path)
end

-- accel.models.config(dir): the folder's config.json.
function config.of_folder(dir)
  if not config.is_folder(dir) then args.error("accel.models.config: '" .. tostring(dir) .. "' is not a folder") end
  return config.read(dir)
end

-- Sets the keys `cfg` lacks (absent, not null) to transformers' defaults for
-- its model_type, so that the model built and the config.json saved are the
-- ones transformers would make of it.
function config.fill(cfg, defaults)
  local nulls = nulls_of[cfg] or {}
  for k, v in pairs(defaults) do
    if cfg[k] == nil and not nulls[k] then cfg[k] = v end
  end
  return cfg
end

-- Whether `t` came from read or from_table.
function config.is_config(t)
  return sources[t] ~= nil
end

-- Where a config came from ("models/x/config.json", or "the config table").
function config.source(cfg)
  return sources[cfg] or "the config table"
end

local function wrong(cfg, key, expected, v)
  args.error(string.format("%s: key '%s' must be %s, got %s (a %s)", config.source(cfg), key, expected,
                           tostring(v), type(v)))
end

-- cfg[key] of `kind`, a Lua type or "count" (a positive integer); `default`
-- when absent, and a nil default makes the key required. Errors name the
-- file and the key.
function config.get(cfg, key, kind, default)
  local v = cfg[key]
  if v == nil then
    if default ~= nil then return default end
    args.error(string.format("%s: missing key '%s' (model_type '%s' needs it)", config.source(cfg), key,
                             tostring(cfg.model_type)))
  end
  if kind == "count" then
    if type(v) ~= "number" or v ~= v or v % 1 ~= 0 or v < 1 then wrong(cfg, key, "a positive integer", v) end
  elseif type(v) ~= kind then
    wrong(cfg, key, "a " .. kind, v)
  end
  return v
end

-- cfg[key] or nil; a present value must have Lua type `kind`.
function config.optional(cfg, key, kind)
  local v = cfg[key]
  if v ~= nil and type(v) ~= kind then wrong(cfg, key, "a " .. kind .. " or null", v) end
  return v
end

-- The JSON text save_pretrained writes: every key, nulls included.
function config.to_json(cfg)
  local t = {}
  for k, v in pairs(cfg) do t[k] = v end
  for k in pairs(nulls_of[cfg] or {}) do
    if t[k] == nil then t[k] = null end
  end
  local floats = {}
  for _, k in ipairs(float_keys) do floats[k] = true end
  for k in pairs(floats_of[cfg] or {}) do floats[k] = true end
  return core.json.encode(t, floats)
end

return config
