-- Splits a data set into non-overlapping random subsets that share its
-- storage, the same on every rank:
--   local train, val = unpack(data.random_split(ds, {0.8, 0.2}, {seed = 1}))
--   data.random_split(ds, {800, 200})
-- Lengths are sample counts summing to the data set's length, or fractions
-- summing to 1 (floored, the remainder handed out one by one from the
-- first subset, as PyTorch does). The order is the engine's permutation
-- for `seed` (default: the seed given to accel.set_seed), which is
-- PyTorch's randperm for a generator seeded with it.
local core = require("accel.core")
local random = require("accel.util.random")
local dataset = require("accel.data.dataset")
local Subset = require("accel.data.subset")

local function counts(spec, n)
  local sum, integral = 0, true
  for i, v in ipairs(spec) do
    if type(v) ~= "number" or v < 0 then
      error(string.format("data.random_split: length %d is %s; lengths are counts or fractions >= 0",
                          i, tostring(v)), 3)
    end
    sum, integral = sum + v, integral and v % 1 == 0
  end
  if integral and sum == n then return spec end
  if math.abs(sum - 1) > 1e-6 then
    error(string.format("data.random_split: lengths sum to %s: they must be counts summing to the "
                        .. "data set's %d samples, or fractions summing to 1", tostring(sum), n), 3)
  end
  local out, total = {}, 0
  for i, fraction in ipairs(spec) do
    out[i] = math.floor(fraction * n)
    total = total + out[i]
  end
  for i = 0, n - total - 1 do
    local k = i % #out + 1
    out[k] = out[k] + 1
  end
  return out
end

return function(ds, lengths, options)
  dataset.check(ds, "data.random_split", 2)
  if type(lengths) ~= "table" or #lengths == 0 then
    error("data.random_split: lengths must be a non-empty table of counts or fractions", 2)
  end
  options = options or {}
  for key in pairs(options) do
    if key ~= "seed" then error("data.random_split: unknown option '" .. tostring(key) .. "' (known: seed)", 2) end
  end
  local n = dataset.length(ds)
  local sizes = counts(lengths, n)
  local order = core.data.permutation(n, options.seed or random.initial_seed()) + 1
  local subsets, offset = {}, 0
  for i, size in ipairs(sizes) do
    subsets[i] = Subset(ds, size > 0 and order:narrow(1, offset + 1, size) or {})
    offset = offset + size
  end
  return subsets
end
