-- Some samples of another data set, sharing its storage:
--   data.Subset(dataset, {3, 1, 2})   -- sample 1 is dataset's sample 3
-- `indices` (1-based; a table or an int64 tensor) becomes the int64 tensor
-- `subset.indices`. A subset of a built-in data set is one too: it reads
-- the parent's tensors through a row index, so the DataLoader still
-- gathers its batches in C++.
local core = require("accel.core")
local dataset = require("accel.data.dataset")

local Subset = {}
Subset.__index = Subset

local function new(_, parent, indices)
  dataset.check(parent, "data.Subset", 2)
  if type(indices) == "table" then indices = core.tensor(indices, { dtype = "int64" }) end
  if type(indices) ~= "userdata" or indices:dim() ~= 1 then
    error("data.Subset: indices must be a table or a 1-D int64 tensor of 1-based sample numbers", 2)
  end
  local n, parent_length = indices:numel(), dataset.length(parent)
  for i, index in ipairs(indices:totable()) do
    if index < 1 or index > parent_length or index % 1 ~= 0 then
      error(string.format("data.Subset: index %d is %s, not in 1..%d", i, tostring(index), parent_length), 2)
    end
  end
  local self = setmetatable({ dataset = parent, indices = indices, length = n }, Subset)
  local tensors, parent_rows = dataset.rows(parent)
  if tensors then
    local rows = indices - 1
    self.tensors = tensors
    self.row_index = parent_rows and core.data.take_rows({ parent_rows }, rows)[1] or rows
  end
  return self
end

function Subset:__len()
  return self.length
end

function Subset:get(i)
  if type(i) ~= "number" or i < 1 or i > self.length or i % 1 ~= 0 then
    error(string.format("Subset:get: sample %s is not in 1..%d", tostring(i), self.length), 2)
  end
  return self.dataset:get(self.indices[i]:item())
end

return setmetatable(Subset, { __call = new })
