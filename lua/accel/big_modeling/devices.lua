-- The places a device map or max_memory names: "cpu", "disk", or a GPU as
-- Accelerate writes it (an integer N, 0-based) or as accel does ("cuda:N").
-- GPUs are checked against the machine, so a map asking for one where there
-- is none is refused before anything loads.
local core = require("accel.core")

local devices = {}

-- The canonical name ("cpu", "disk", "cuda:N"); `what` names the value in errors.
function devices.normalize(value, what)
  if value == "cpu" or value == "disk" then return value end
  local index
  if type(value) == "number" and value >= 0 and value == math.floor(value) then
    index = value
  elseif type(value) == "string" then
    index = tonumber(value:match("^cuda:(%d+)$") or (value == "cuda" and "0") or nil)
  end
  if index == nil then
    error(string.format("%s: unknown device %s (use \"cpu\", \"disk\", a GPU index such as 0, or \"cuda:0\")",
                        what, type(value) == "string" and ("\"" .. value .. "\"") or tostring(value)), 0)
  end
  local count = core.cuda.device_count()
  if index >= count then
    error(string.format("%s: GPU %d was asked for, but %s", what, index,
                        count == 0 and "this machine has no GPU" or ("this machine has " .. count .. " GPU(s)")), 0)
  end
  return "cuda:" .. index
end

return devices
