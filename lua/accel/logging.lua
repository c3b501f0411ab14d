-- accel.logging.get_logger(name[, level]) (also accel.get_logger), as
-- Accelerate's get_logger: a logger whose messages appear once, from the
-- main process, unless a call says {main_process_only = false}; then every
-- rank logs, its rank in the line. Lines go to stderr:
--   INFO train: epoch 3 loss 0.412
--   WARNING train [rank 1]: rank-local detail
-- Levels, lowest first: debug, info, warning, error, critical. A logger
-- shows its level and those above: the level given, else $ACCEL_LOG_LEVEL,
-- else info. logger:set_level(name) changes it.
--   local log = accel.get_logger("train")
--   log:info("epoch %d loss %.3f", epoch, loss)
--   log:warning({ main_process_only = false }, "rank-local detail")
local core = require("accel.core")
local args = require("accel.util.args")

local logging = {}

logging.LEVELS = { "debug", "info", "warning", "error", "critical" }
local rank_of = {}
for i, name in ipairs(logging.LEVELS) do rank_of[name] = i end

local function level_named(name, where)
  local level = type(name) == "string" and rank_of[name:lower()]
  if not level then
    args.error(string.format("%s: unknown log level '%s' (known: %s)", where, tostring(name),
                             table.concat(logging.LEVELS, ", ")))
  end
  return level
end

-- The level $ACCEL_LOG_LEVEL sets, checked each time a logger is made.
local function environment_level()
  local name = os.getenv("ACCEL_LOG_LEVEL")
  if name == nil or name == "" then return nil end
  return level_named(name, "ACCEL_LOG_LEVEL")
end

local Logger = {}
Logger.__index = Logger

local function emit(self, level, first, ...)
  local main_only, format = true, first
  local n, values = select("#", ...), { ... }
  if type(first) == "table" then
    args.options("Logger:" .. logging.LEVELS[level], first, { main_process_only = true })
    main_only = first.main_process_only ~= false
    format = values[1]
    values = { unpack(values, 2, n) }
    n = n - 1
  end
  if level < self.level then return end
  local rank = core.dist.state().rank
  if main_only and rank ~= 0 then return end
  local message = n > 0 and string.format(format, unpack(values, 1, n)) or tostring(format)
  local who = main_only and "" or string.format(" [rank %d]", rank)
  io.stderr:write(string.format("%s %s%s: %s\n", logging.LEVELS[level]:upper(), self.name, who, message))
end

for level, name in ipairs(logging.LEVELS) do
  Logger[name] = function(self, ...) emit(self, level, ...) end
end

function Logger:set_level(name)
  self.level = level_named(name, "Logger:set_level")
end

-- The name of the lowest level this logger shows.
function Logger:get_level()
  return logging.LEVELS[self.level]
end

function Logger:is_enabled_for(name)
  return level_named(name, "Logger:is_enabled_for") >= self.level
end

function logging.get_logger(name, level)
  if name ~= nil and type(name) ~= "string" then
    args.error("get_logger: the name must be a string, got a " .. type(name))
  end
  local chosen = level ~= nil and level_named(level, "get_logger") or environment_level() or rank_of.info
  return setmetatable({ name = name or "accel", level = chosen }, Logger)
end

return logging
