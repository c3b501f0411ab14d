-- The call defaults a tokenizer_config.json gives, checked when it is read
-- (a downloaded file is data: a field of the wrong kind is an error naming
-- the file and the key, not a failure at the first call), as transformers
-- reads them: `model_max_length` (or its older name `max_len`) is the
-- length truncation = true and padding = "max_length" cut or pad to when a
-- call gives no max_length; transformers writes int(1e30) for none, and
-- reads no other `max_length` key; `padding_side` and `truncation_side` are
-- "left" or "right" (right when absent).
local core = require("accel.core")

local call_defaults = {}

-- A model_max_length at or above this is transformers' "no limit".
local NO_LIMIT = 1e18

-- {model_max_length = n or nil, padding_side, truncation_side} from
-- `config` (tokenizer_config.json's object, or nil) read from `path`.
function call_defaults.read(config, path)
  config = config or {}
  local function fail(key, what, value)
    local shown = type(value) == "string" and string.format("%q", value:sub(1, 40)) or tostring(value)
    if type(value) == "table" then shown = value == core.json.null and "null" or "a " .. (value[1] and "list" or "object") end
    error(string.format("'%s': '%s' must be %s, got %s", path, key, what, shown), 0)
  end
  local out = {}
  for _, key in ipairs({ "model_max_length", "max_len" }) do
    local n = config[key]
    if n == core.json.null then n = nil end  -- None, as absent
    if n ~= nil and out.model_max_length == nil and not out.unlimited then
      if type(n) ~= "number" or n % 1 ~= 0 or n < 1 then
        fail(key, "a whole number of at least 1 (1e30 for none, as transformers writes)", n)
      end
      if n < NO_LIMIT then out.model_max_length = n else out.unlimited = true end
    end
  end
  out.unlimited = nil
  for _, key in ipairs({ "padding_side", "truncation_side" }) do
    local side = config[key]
    if side == nil then side = "right" end
    if side ~= "left" and side ~= "right" then fail(key, '"left" or "right"', side) end
    out[key] = side
  end
  return out
end

return call_defaults
