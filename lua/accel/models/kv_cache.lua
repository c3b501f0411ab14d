-- The key/value cache of a decoder: per layer, the keys and values of every
-- position seen so far, (B, kv_heads, S, head_dim), so that each generated
-- token attends to them without recomputing them.
--   local cache = KVCache()
--   k, v = cache:update(layer, k_new, v_new)   -- all positions so far
--   cache:length()                              -- positions held
--   cache:select(rows)                          -- keep batch rows (1-based, integer tensor)
local core = require("accel.core")

local KVCache = {}
KVCache.__index = KVCache

local function new()
  return setmetatable({ keys = {}, values = {} }, KVCache)
end

function KVCache:update(layer, k, v)
  local old_k, old_v = self.keys[layer], self.values[layer]
  if old_k then
    k, v = core.cat({ old_k, k }, 3), core.cat({ old_v, v }, 3)
  end
  self.keys[layer], self.values[layer] = k, v
  return k, v
end

function KVCache:length()
  local k = self.keys[1]
  return k and k:size(3) or 0
end

function KVCache:select(rows)
  for layer, k in pairs(self.keys) do
    self.keys[layer] = k:index_select(1, rows)
    self.values[layer] = self.values[layer]:index_select(1, rows)
  end
end

return setmetatable(KVCache, { __call = new })
