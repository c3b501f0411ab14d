-- The benchmark's model: LAYERS Linear(4096, 4096) blocks (64 MiB each in
-- float32; 32 of them, 2 GiB), as a file estimate-memory reads and the other
-- scripts dofile: `return function() return build(layers) end`.
local nn = accel.nn
local layers = tonumber(os.getenv("BIG_MODEL_LAYERS") or "32")

local Net = nn.Module:extend("Net")
function Net:init(n)
  self.layers = nn.ModuleList()
  for _ = 1, n do self.layers:append(nn.Linear(4096, 4096)) end
end
function Net:forward(x)
  for _, layer in ipairs(self.layers) do x = layer(x):relu() end
  return x
end

return function() return Net(layers) end
