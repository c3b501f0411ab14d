-- Numeric CSV files (optionally gzip-compressed) as a float tensor.
local core = require("accel.core")

local csv = {}

local function open_lines(path)
  if path:match("%.gz$") then
    local probe = io.open(path, "rb")
    if not probe then error("cannot open '" .. path .. "'", 3) end
    probe:close()
    return io.popen("gzip -dc '" .. path:gsub("'", "'\\''") .. "'", "r")
  end
  local f, err = io.open(path, "r")
  if not f then error("cannot open '" .. path .. "': " .. tostring(err), 3) end
  return f
end

-- read(path, {header = false, delimiter = ","}) -> rows x columns float32
-- tensor. A field that is not a number is an error naming file, line and
-- column.
function csv.read(path, options)
  options = options or {}
  local delimiter = options.delimiter or ","
  local pattern = "([^" .. delimiter .. "]*)"
  local f = open_lines(path)
  local rows, width, line_number = {}, nil, 0
  for line in f:lines() do
    line_number = line_number + 1
    if not (options.header and line_number == 1) and line:match("%S") then
      local row = {}
      for field in (line .. delimiter):gmatch(pattern .. delimiter) do
        local value = tonumber(field)
        if value == nil then
          f:close()
          error(string.format("%s:%d: column %d is not a number: '%s'", path, line_number,
                              #row + 1, field), 2)
        end
        row[#row + 1] = value
      end
      width = width or #row
      if #row ~= width then
        f:close()
        error(string.format("%s:%d: %d columns, but earlier lines have %d", path, line_number,
                            #row, width), 2)
      end
      rows[#rows + 1] = row
    end
  end
  f:close()
  return core.tensor(rows, { dtype = "float32" })
end

return csv
