-- accel.get_logger(name[, level]): a logger whose messages appear once, from
-- the main process, unless a call says {main_process_only = false}; then
-- every rank logs, its rank in the line.
--   local log = accel.get_logger("train")
--   log:info("epoch %d loss %.3f", epoch, loss)
--   log:warning({ main_process_only = false }, "rank-local detail")
local core = require("accel.core")

local logging = {}

local levels = { debug = 10, info = 20, warning = 30, error = 40 }

local Logger = {}
Logger.__index = Logger

local function emit(self, level, first, ...)
  if levels[level] < self.level then return end
  local main_only, format = true, first
  local args = { ... }
  if type(first) == "table" then
    if first.main_process_only == false then main_only = false end
    format = args[1]
    table.remove(args, 1)
  end
  local rank = core.dist.state().rank
  if main_only and rank ~= 0 then return end
  local message = select("#", unpack(args)) > 0 and string.format(format, unpack(args)) or tostring(format)
  local who = main_only and "" or string.format(" [rank %d]", rank)
  io.stderr:write(string.format("%s %s%s: %s\n", level:upper(), self.name, who, message))
end

for level in pairs(levels) do
  Logger[level] = function(self, ...) emit(self, level, ...) end
end

function logging.get_logger(name, level)
  level = level or "info"
  if not levels[level] then error("get_logger: unknown level '" .. tostring(level) .. "'", 2) end
  return setmetatable({ name = name or "accel", level = levels[level] }, Logger)
end

return logging
