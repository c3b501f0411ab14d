-- Trackers: what Accelerator{log_with = ...} records of a run, under
-- <project_dir>/<run name>/ on the main process only.
--   "jsonl"        metrics.jsonl, one JSON object per acc:log call, and config.json
--   "tensorboard"  events.out.tfevents.* for TensorBoard: scalars and the
--                  config as hyperparameters
--   "all"          both; or a list of names: {"jsonl", "tensorboard"}
-- The files are the engine's (engine/tracking/); this module checks what a
-- recipe passes and turns it into the {name = number} tables the engine
-- reads. Docs: docs/api/tracking.md.
local core = require("accel.core")
local args = require("accel.util.args")

local tracking = {}

tracking.KINDS = { "jsonl", "tensorboard" }
local known_kind = { jsonl = true, tensorboard = true }

-- The tracker names log_with stands for, or nil and a message saying what
-- is wrong with it.
function tracking.kinds(log_with)
  if log_with == "all" then return { unpack(tracking.KINDS) } end
  local list = type(log_with) == "string" and { log_with } or log_with
  if type(list) ~= "table" or #list == 0 then
    return nil, "log_with must be 'jsonl', 'tensorboard', 'all' or a list of those, got "
                .. (type(log_with) == "table" and "an empty table" or tostring(log_with))
  end
  for key in pairs(list) do
    if type(key) ~= "number" then
      return nil, "log_with: a list of tracker names takes no key '" .. tostring(key) .. "'"
    end
  end
  local kinds, seen = {}, {}
  for _, name in ipairs(list) do
    if not known_kind[name] then
      return nil, string.format("log_with: unknown tracker %s (known: jsonl, tensorboard, all)",
                                type(name) == "string" and ("'" .. name .. "'") or ("a " .. type(name)))
    end
    if not seen[name] then kinds[#kinds + 1] = name end
    seen[name] = true
  end
  return kinds
end

local is_tensor = core.is_tensor

-- `values` as {name = number}: one-element tensors become numbers, nested
-- tables become "outer/inner" names (TensorBoard groups them so). A table
-- that is flat already is returned as is, so logging plain numbers copies nothing.
local function flatten_into(out, prefix, values, where)
  for key, value in pairs(values) do
    local name = prefix .. tostring(key)
    if type(value) == "number" then
      out[name] = value
    elseif is_tensor(value) then
      if value:numel() ~= 1 then
        args.error(string.format("%s: '%s' is a tensor of %d elements; log one value per name",
                                 where, name, value:numel()))
      end
      out[name] = value:item()
    elseif type(value) == "table" and getmetatable(value) == nil then
      flatten_into(out, name .. "/", value, where)
    else
      args.error(string.format("%s: '%s' is a %s; log numbers, one-element tensors or tables of them",
                               where, name, type(value)))
    end
  end
  return out
end

function tracking.scalars(values, where)
  if type(values) ~= "table" then
    args.error(string.format("%s: values must be a table {name = number}, got a %s", where, type(values)))
  end
  for key, value in pairs(values) do
    if type(key) ~= "string" or type(value) ~= "number" then return flatten_into({}, "", values, where) end
  end
  return values
end

-- A run's configuration for hparams: numbers, booleans and strings;
-- tensors become numbers and nested tables "outer/inner" keys.
function tracking.config(config, where)
  if config == nil then return {} end
  if type(config) ~= "table" then
    args.error(string.format("%s: config must be a table, got a %s", where, type(config)))
  end
  local out = {}
  local function walk(prefix, t)
    for key, value in pairs(t) do
      local name = prefix .. tostring(key)
      if is_tensor(value) and value:numel() == 1 then
        out[name] = value:item()
      elseif type(value) == "table" and getmetatable(value) == nil then
        walk(name .. "/", value)
      elseif type(value) == "number" or type(value) == "boolean" or type(value) == "string" then
        out[name] = value
      else
        args.error(string.format("%s: config '%s' is a %s; hyperparameters are numbers, booleans or strings",
                                 where, name, type(value)))
      end
    end
  end
  walk("", config)
  return out
end

-- One tracker of a run: acc:get_tracker(name) returns it. On other ranks
-- than the main process every method does nothing, as Accelerate's.
local Tracker = {}
Tracker.__index = Tracker

function tracking.open(kind, run_dir)
  return setmetatable({ name = kind, run_dir = run_dir, writer = core.tracking.open(kind, run_dir) }, Tracker)
end

function tracking.blank(kind)
  return setmetatable({ name = kind }, Tracker)
end

-- The file this tracker writes its scalars to (nil on other ranks).
function Tracker:path()
  return self.writer and self.writer:path()
end

function Tracker:log(values, step)
  if not self.writer then return end
  self.writer:log(step or 0, tracking.scalars(values, "Tracker:log"))
end

function Tracker:store_init_configuration(config)
  if self.writer then self.writer:log_config(tracking.config(config, "Tracker:store_init_configuration")) end
end

function Tracker:flush()
  if self.writer then self.writer:flush() end
end

-- Flushes and closes; with failed = true TensorBoard marks the session failed.
function Tracker:finish(failed)
  if self.writer then self.writer:close(failed == true) end
end

return tracking
