-- A model placed across a GPU and other devices computes each part where its
-- weights are, as Accelerate's AlignDevicesHook does: every module the device
-- map names gets the tensors among its arguments on its execution device
-- (its own; the main device for a part on disk, whose weights are read
-- there), and the model's results go back to the device of its first input
-- tensor (io_same_device). The main device is the first GPU of the map.
-- Attached only when the map names a GPU: on the CPU and disk alone nothing
-- moves, since everything computes on the CPU.
local Module = require("accel.nn.module")
local tensor_tree = require("accel.util.tensor_tree")

local device_alignment = {}

-- `value` with every tensor in it (nested plain tables walked) on `device`.
local function moved(value, device)
  return tensor_tree.map(value, function(t) return t.device == device and t or t:to(device) end)
end

local function pack(...)
  return { n = select("#", ...), ... }
end

-- The device of the first tensor among `values` (packed arguments), or nil.
local function first_device(values)
  for i = 1, values.n do
    local found = tensor_tree.each(values[i], function(t) return t.device end)
    if found then return found end
  end
end

-- Wraps `m` around whatever wrapper it has (disk offload loads first, then
-- the arguments move, then its forward runs).
local function wrap(m, around)
  local inner = Module.forward_wrapper(m) or function(self, ...) return self:forward(...) end
  Module.set_forward_wrapper(m, function(self, ...) return around(inner, self, ...) end)
end

-- The first GPU the map names, or nil.
function device_alignment.main_device(entries)
  local main
  for _, e in ipairs(entries) do
    local index = tonumber(tostring(e.device):match("^cuda:(%d+)$"))
    if index and (not main or index < main) then main = index end
  end
  return main and ("cuda:" .. main) or nil
end

-- `entries`: placement.resolve's, each with .unit (the map's name that
-- placed it) and .device; `modules`: name -> module.
function device_alignment.attach(model, entries, modules, main)
  local placed = {}
  for _, e in ipairs(entries) do
    local m = modules[e.unit]
    if m and not placed[m] then placed[m] = e.device == "disk" and main or e.device end
  end
  for m, device in pairs(placed) do
    wrap(m, function(inner, self, ...)
      local args = moved(pack(...), device)
      return inner(self, unpack(args, 1, args.n))
    end)
  end
  wrap(model, function(inner, self, ...)
    local home = first_device(pack(...))
    local results = pack(inner(self, ...))
    if not home then return unpack(results, 1, results.n) end
    results = moved(results, home)
    return unpack(results, 1, results.n)
  end)
end

return device_alignment
