-- Samples are the rows of tensors that share their first dim:
--   data.TensorDataset(x, y)  -- sample i is x[i], y[i]
local TensorDataset = {}
TensorDataset.__index = TensorDataset

local function new(...)
  local tensors = { ... }
  assert(#tensors > 0, "data.TensorDataset needs at least one tensor")
  local n = tensors[1]:size(1)
  for i, t in ipairs(tensors) do
    if t:size(1) ~= n then
      error(string.format("data.TensorDataset: tensor %d has %d rows, tensor 1 has %d", i, t:size(1), n), 2)
    end
  end
  return setmetatable({ tensors = tensors, length = n }, TensorDataset)
end

function TensorDataset:__len()
  return self.length
end

function TensorDataset:get(i)
  local out = {}
  for k, t in ipairs(self.tensors) do out[k] = t[i] end
  return unpack(out)
end

return setmetatable(TensorDataset, { __call = function(_, ...) return new(...) end })
