-- Modules placed on "disk": their weights stay on the meta device and are
-- read just before their forward and dropped right after it, so a model runs
-- with only one offloaded part in memory at a time. `read(entries)` gives the
-- tensors of a part, in the order of `entries`, as CPU tensors.
local core = require("accel.core")
local Module = require("accel.nn.module")

local disk_offload = {}

local function pack(...)
  return { n = select("#", ...), ... }
end

local function meta_like(t)
  return core.empty(t:size(), { dtype = t.dtype, device = "meta" })
end

local function put(e, t)
  rawset(e.module, e.key, e.is_buffer and t or t:requires_grad_())
end

-- Replaces the entries' tensors with meta ones of the dtype they load as.
function disk_offload.empty(entries)
  for _, e in ipairs(entries) do put(e, core.empty(e.shape, { dtype = e.dtype, device = "meta" })) end
end

local function returned(results, t)
  for i = 2, results.n do
    if rawequal(results[i], t) then return true end
  end
  return false
end

-- Wraps `module`'s forward to load `entries` around it.
function disk_offload.attach(module, entries, read)
  Module.set_forward_wrapper(module, function(m, ...)
    local loaded = read(entries)
    for i, e in ipairs(entries) do put(e, loaded[i]) end
    local results = pack(pcall(m.forward, m, ...))
    for i, e in ipairs(entries) do
      put(e, meta_like(loaded[i]))
      -- Freed now rather than at the next collection, unless forward handed it out.
      if not returned(results, loaded[i]) then core.release_tensor(loaded[i]) end
    end
    if not results[1] then error(results[2], 0) end
    return unpack(results, 2, results.n)
  end)
end

return disk_offload
