-- Numeric CSV files (optionally gzip-compressed), parsed in C++
-- (engine/data/csv_reader.h):
--   local ds = data.CSVDataset("iris.csv", {header = true, target = "species"})
--   local x, y = ds:get(1)   -- float32 features, the int64 target
-- Options: header (false), delimiter (","), columns (the feature columns,
-- names or 1-based numbers; default every column but the target), target
-- (a name or number), target_dtype (accel.int64). A field that is not a
-- number is an error naming file, line and column. Fields:
-- `features` [n, columns], `targets` [n] (nil without a target),
-- `columns` (the feature columns' names, or numbers without a header).
-- data.read_csv(path, {header, delimiter}) reads every column into one
-- float32 tensor.
local core = require("accel.core")

local CSVDataset = {}
CSVDataset.__index = CSVDataset

local function check_options(options, known, what)
  for key in pairs(options) do
    if not known[key] then
      local names = {}
      for k in pairs(known) do names[#names + 1] = k end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (known: %s)", what, tostring(key),
                          table.concat(names, ", ")), 3)
    end
  end
end

local function new(_, path, options)
  options = options or {}
  check_options(options, { header = true, columns = true, target = true, target_dtype = true,
                           delimiter = true }, "data.CSVDataset")
  if options.target_dtype ~= nil and options.target == nil then
    error("data.CSVDataset: target_dtype is set but no target column is", 2)
  end
  local features, targets, columns = core.data.CSVDataset(path, options)
  return setmetatable({
    path = path,
    features = features,
    targets = targets,
    columns = columns,
    tensors = targets and { features, targets } or { features },
    length = features:size(1),
  }, CSVDataset)
end

function CSVDataset:__len()
  return self.length
end

function CSVDataset:get(i)
  if self.targets then return self.features[i], self.targets[i] end
  return self.features[i]
end

function CSVDataset.read(path, options)
  options = options or {}
  check_options(options, { header = true, delimiter = true }, "data.read_csv")
  return (core.data.read_csv(path, options))
end

return setmetatable(CSVDataset, { __call = new })
