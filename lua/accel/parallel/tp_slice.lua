-- This rank's slice of a weight split evenly over a tensor-parallel group,
-- as a new leaf parameter; errors name the module, the size and tp_size.
local args = require("accel.util.args")

local shard = {}

-- The `rank`-th of `tp.size` equal slices of `t` along `dim` (1-based).
function shard.slice(t, dim, tp, what)
  local n = t:size(dim)
  if n % tp.size ~= 0 then
    args.error(string.format("accel.parallel.tensor_parallel: %s has %d along dim %d, which does not split "
                             .. "evenly over tp_size %d", what, n, dim, tp.size))
  end
  local width = n / tp.size
  return t:detach():narrow(dim, tp.rank * width + 1, width):clone():requires_grad_(t.requires_grad)
end

-- Every rank's slice of `t` joined along `dim`: the full tensor again.
function shard.gather(t, dim, tp)
  return require("accel.core").cat(tp:all_gather(t:detach()), dim)
end

return shard
