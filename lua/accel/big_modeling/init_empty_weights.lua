-- accel.init_empty_weights(fn): runs fn with tensor creation sent to LibTorch's
-- meta device, so the parameters and buffers of the modules it builds have
-- shapes and dtypes but no memory at all (nothing is allocated and then
-- moved). Returns what fn returns. Each module built there refuses to run its
-- forward while its own weights are still on the meta device, naming them,
-- rather than quietly computing meta outputs.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local function still_empty(m)
  local names = {}
  for _, key in ipairs(m._fields) do
    local v = rawget(m, key)
    if type(v) == "userdata" and v.device == "meta" then names[#names + 1] = tostring(key) end
  end
  return names
end

local function refuse_empty_weights(m, ...)
  local empty = still_empty(m)
  if #empty > 0 then
    args.error(string.format("%s: %s on the meta device (built under accel.init_empty_weights); "
                             .. "load weights with accel.load_checkpoint_and_dispatch or give them "
                             .. "memory with model:to_empty(device) first",
                             tostring(m), table.concat(empty, ", ") .. (#empty > 1 and " are" or " is")))
  end
  -- Filled since (by hand, or by a loader that left the guard): no more checks.
  Module.set_forward_wrapper(m, nil)
  return m:forward(...)
end

local function pack(...)
  return { n = select("#", ...), ... }
end

local function guard(m)
  Module.set_forward_wrapper(m, refuse_empty_weights)
end

return function(fn)
  if type(fn) ~= "function" then
    args.error("accel.init_empty_weights: expected a function that builds the model, got a " .. type(fn))
  end
  local outer_device, outer_hook = core.creation_device(), Module.on_new_instance
  core.set_creation_device("meta")
  Module.on_new_instance = guard
  local results = pack(pcall(fn))
  core.set_creation_device(outer_device ~= "cpu" and outer_device or nil)
  Module.on_new_instance = outer_hook
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, results.n)
end
