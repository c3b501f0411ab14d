-- accel.models.from_config(cfg_or_dir, {dtype}): a model of the config's
-- architecture with fresh weights, N(0, initializer_range^2) as
-- transformers initialises them; {dtype} converts it.
local args = require("accel.util.args")
local config = require("accel.models.config")
local architectures = require("accel.models.architectures")
local dtypes = require("accel.big_modeling.dtypes")

-- A folder's config, or a table in transformers' keys.
local function config_of(source, where)
  if type(source) == "string" then
    if not config.is_folder(source) then args.error(where .. ": '" .. source .. "' is not a folder") end
    return config.read(source)
  end
  if type(source) ~= "table" then
    args.error(where .. ": expected a folder or a config table, got a " .. type(source))
  end
  if config.is_config(source) then return source end
  return config.from_table(source, "the config table")
end

return function(source, options)
  local where = "accel.models.from_config"
  local o = args.options(where, options, { dtype = args.NONE }, { dtype = "string" })
  local cfg = config_of(source, where)
  local model = architectures.of(cfg)(cfg)
  model:init_weights(config.get(cfg, "initializer_range", "number", 0.02))
  if o.dtype then
    dtypes.check(where, o.dtype)
    model:to(o.dtype)
  end
  return model
end
