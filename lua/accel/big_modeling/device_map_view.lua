-- A device map that prints readably: tostring(map) lists each entry in model
-- order with its device and size. The order and sizes live in the metatable,
-- so pairs(map) still gives only name -> device, as a map written by hand.
local memory_size = require("accel.big_modeling.memory_size")
local clean_device_map = require("accel.big_modeling.clean_device_map")

local device_map_view = {}

local function describe(map)
  local meta = getmetatable(map)
  local width = 4
  for _, name in ipairs(meta.order) do width = math.max(width, #name) end
  local lines = { string.format("device map (%d entries):", #meta.order) }
  for _, name in ipairs(meta.order) do
    lines[#lines + 1] = string.format("  %-" .. width .. "s  %-7s %s", name == "" and "(model)" or name,
                                      tostring(map[name]), memory_size.format(meta.sizes[name] or 0))
  end
  local totals = {}
  for _, name in ipairs(meta.order) do
    local device = tostring(map[name])
    if not totals[device] then
      totals[device] = 0
      totals[#totals + 1] = device
    end
    totals[device] = totals[device] + (meta.sizes[name] or 0)
  end
  local parts = {}
  for _, device in ipairs(totals) do parts[#parts + 1] = device .. " " .. memory_size.format(totals[device]) end
  lines[#lines + 1] = "  total: " .. table.concat(parts, ", ")
  return table.concat(lines, "\n")
end

-- `order`: the names in model order; `sizes`: name -> bytes.
function device_map_view.new(map, order, sizes)
  return setmetatable(map, { __tostring = describe, order = order, sizes = sizes })
end

-- The same placement with entries that share a device merged into their
-- module's (clean_device_map.lua), as a new view.
function device_map_view.cleaned(view)
  local meta = getmetatable(view)
  local map, order = clean_device_map(view, meta.order)
  return device_map_view.new(map, order, meta.sizes)
end

return device_map_view
