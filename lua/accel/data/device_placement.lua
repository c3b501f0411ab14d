-- Moves a loader's batches to the device its Accelerator computes on. On a
-- GPU each tensor is first copied into pinned (page-locked) host memory, so
-- that the copy to the GPU runs asynchronously, as PyTorch's DataLoader with
-- pin_memory=True and `.to(device, non_blocking=True)` do; the caching host
-- allocator keeps the pinned block until the copy has completed.
local tensor_tree = require("accel.util.tensor_tree")

local device_placement = {}

local function place(value, device)
  return tensor_tree.map(value, function(t)
    if t.device == device then return t end
    if device == "cpu" then return t:to(device) end
    return t:pin_memory():to(device, true)
  end)
end

local function place_all(device, first, ...)
  if first == nil then return nil end
  local n, values = select("#", ...) + 1, { first, ... }
  for i = 1, n do values[i] = place(values[i], device) end
  return unpack(values, 1, n)
end

-- An iterator returning what `next_batch` returns, moved to `device`.
function device_placement.iterator(next_batch, device)
  return function() return place_all(device, next_batch()) end
end

return device_placement
