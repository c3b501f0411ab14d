-- The memory budget per device for device_map = "auto": max_memory as
-- Accelerate takes it ({[0] = "10GiB", cpu = "2GiB"}), checked key by key.
-- Without max_memory, as Accelerate's get_max_memory: every GPU gets its
-- free memory now (accel.cuda.mem_get_info) and the CPU the memory
-- available now (MemAvailable). With it, only the GPUs it names are used;
-- the CPU gets MemAvailable when left out.
-- Returns the devices in filling order (GPUs by index, "cpu", "disk") and
-- the budget of each in bytes, disk being unlimited.
local core = require("accel.core")
local devices = require("accel.big_modeling.devices")
local memory_size = require("accel.big_modeling.memory_size")

local function available_cpu_bytes()
  local f = io.open("/proc/meminfo")
  if not f then return math.huge end
  local text = f:read("*a")
  f:close()
  local kib = text:match("MemAvailable:%s*(%d+)")
  return kib and tonumber(kib) * 1024 or math.huge
end

return function(where, given)
  local budget = {}
  if given ~= nil and type(given) ~= "table" then
    error(string.format("%s: max_memory must be a table such as {cpu = \"2GiB\"}, got a %s", where, type(given)), 0)
  end
  for key, value in pairs(given or {}) do
    local shown = type(key) == "string" and ("\"" .. key .. "\"") or tostring(key)
    local what = string.format("%s: max_memory[%s]", where, shown)
    local device = devices.normalize(key, what)
    budget[device] = memory_size.parse(value, what)
  end
  if given == nil then
    for i = 0, core.cuda.device_count() - 1 do budget["cuda:" .. i] = (core.cuda.mem_get_info(i)) end
  end
  if budget.cpu == nil then budget.cpu = available_cpu_bytes() end
  budget.disk = math.huge
  local order = {}
  for device in pairs(budget) do
    if device:match("^cuda:") then order[#order + 1] = device end
  end
  table.sort(order, function(a, b) return tonumber(a:sub(6)) < tonumber(b:sub(6)) end)
  order[#order + 1] = "cpu"
  order[#order + 1] = "disk"
  return order, budget
end
