-- What the data code asks of a data set. A data set is any table with a
-- __len metamethod and a get(i) method (i from 1 to its length) returning
-- the sample's fields. Built-in data sets are also rows of tensors:
-- `tensors` (sharing their first dim) and, for a subset, `row_index`
-- (0-based rows of those tensors), which the DataLoader gathers in C++.
local dataset = {}

-- LuaJIT ignores __len on tables for `#`, so the metamethod is called
-- explicitly.
function dataset.length(ds)
  local mt = getmetatable(ds)
  return mt.__len(ds)
end

-- Errors, naming `what` and the fault, unless `ds` is a data set.
function dataset.check(ds, what, level)
  local mt = type(ds) == "table" and getmetatable(ds)
  if not (mt and type(mt.__len) == "function") then
    error(string.format("%s: the data set (a %s) needs a __len metamethod and a get(i) method",
                        what, type(ds)), level + 1)
  end
  if type(ds.get) ~= "function" then
    error(what .. ": the data set has no get(i) method", level + 1)
  end
end

-- The tensors and row index of a built-in data set; nil for others.
function dataset.rows(ds)
  local tensors = rawget(ds, "tensors")
  if tensors then return tensors, rawget(ds, "row_index") end
  return nil
end

return dataset
