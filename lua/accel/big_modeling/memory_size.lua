-- Byte counts as Accelerate reads and writes them: "2GiB" (powers of 1024),
-- "500MB" (powers of 1000), a trailing lowercase "b" meaning bits ("8Gb"),
-- and plain numbers of bytes.
local memory_size = {}

local units = {
  GIB = 2 ^ 30, MIB = 2 ^ 20, KIB = 2 ^ 10,
  GB = 1e9, MB = 1e6, KB = 1e3,
}

-- `what` names the value in errors ("max_memory.cpu").
function memory_size.parse(value, what)
  if type(value) == "number" then
    if value < 0 or value ~= math.floor(value) then
      error(string.format("%s must be a whole number of bytes, got %s", what, tostring(value)), 0)
    end
    return value
  end
  if type(value) ~= "string" then
    error(string.format("%s must be a size such as \"2GiB\" or a number of bytes, got a %s", what, type(value)), 0)
  end
  local number, unit = value:match("^%s*([%d%.]+)%s*(%a+)%s*$")
  local factor = unit and units[unit:upper()]
  if not factor or not tonumber(number) then
    error(string.format("%s: cannot read the size \"%s\" (write it as \"2GiB\", \"500MB\" or a number of bytes)",
                        what, value), 0)
  end
  local bytes = math.floor(tonumber(number) * factor)
  if unit:sub(-1) == "b" then bytes = math.floor(bytes / 8) end
  return bytes
end

-- "1.50 GiB", "12.00 KiB", "512 B": for device maps and estimates.
function memory_size.format(bytes)
  for _, u in ipairs({ { "GiB", 2 ^ 30 }, { "MiB", 2 ^ 20 }, { "KiB", 2 ^ 10 } }) do
    if bytes >= u[2] then return string.format("%.2f %s", bytes / u[2], u[1]) end
  end
  return string.format("%d B", bytes)
end

return memory_size
