-- Lua twins of Accelerate's test_utils/training.py and of the small helpers
-- its test scripts share: RegressionDataset, RegressionModel,
-- are_the_same_tensors and allclose.
local nn = accel.nn
local training = {}

-- y = a*x + b + noise, as a Lua data set whose sample is {x = ..., y = ...}
-- (Accelerate's returns a dict). Drawn from `seed` (default 0) so that every
-- rank holds the same data, without touching the seed loaders shuffle from.
local RegressionDataset = {}
RegressionDataset.__index = RegressionDataset
RegressionDataset.__len = function(self) return self.length end
function RegressionDataset:get(i) return { x = self.x[i], y = self.y[i] } end

function training.RegressionDataset(options)
  options = options or {}
  local a, b, length = options.a or 2.0, options.b or 3.0, options.length or 64
  accel.manual_seed(options.seed or 0)
  local x = accel.randn(length)
  local y = x * a + b + accel.randn(length) * 0.1
  return setmetatable({ length = length, x = x, y = y }, RegressionDataset)
end

local RegressionModel = nn.Module:extend("RegressionModel")
function RegressionModel:init(options)
  options = options or {}
  self.a = nn.Parameter(accel.tensor(options.a or 0.0, { dtype = accel.float32 }))
  self.b = nn.Parameter(accel.tensor(options.b or 0.0, { dtype = accel.float32 }))
end
function RegressionModel:forward(x) return x * self.a + self.b end
training.RegressionModel = RegressionModel

local function flat(t)
  local out = {}
  local function walk(v)
    if type(v) == "table" then for _, x in ipairs(v) do walk(x) end else out[#out + 1] = v end
  end
  walk(type(t) == "userdata" and t:totable() or t)
  return out
end
training.flat = flat

-- torch.allclose: |a - b| <= atol + rtol * |b| everywhere.
function training.allclose(a, b, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-8
  local x, y = flat(a), flat(b)
  if #x ~= #y then return false end
  for i = 1, #x do
    if math.abs(x[i] - y[i]) > atol + rtol * math.abs(y[i]) then return false end
  end
  return true
end

-- Whether a tensor holds the same values on every rank.
function training.are_the_same_tensors(acc, t)
  local all = acc:gather_object(flat(t))
  for r = 2, #all do
    if not training.allclose(all[r], all[1], 0, 0) then return false end
  end
  return true
end

-- The batch size nearest below `b` that every rank can split evenly
-- (split_batches needs batch_size divisible by the number of processes).
function training.divisible_batch_size(b, world_size)
  return b - b % world_size
end

return training
