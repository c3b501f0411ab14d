-- Runs the part of a collective helper that every rank must finish alike.
-- An error there, raised on one rank only, cannot be caught and carried on
-- from: the other ranks are in, or about to enter, a collective this rank
-- will not join, and would wait out the collective timeout (or pair the
-- collective with a different one). So with more than one rank such an
-- error ends this rank at once, reported as its failure (message and
-- traceback in the launcher's report), and the launcher stops the others.
-- Argument errors that every rank raises alike are checked before, and stay
-- catchable.
local core = require("accel.core")

return function(world, fn, ...)
  if world.size == 1 then return fn(...) end
  local results = { xpcall(fn, debug.traceback, ...) }
  if results[1] then return unpack(results, 2, table.maxn(results)) end
  io.stdout:flush()
  core.dist.exit_with_error(tostring(results[2]) .. "\n(an error inside a collective helper ends its rank: "
                            .. "the other ranks cannot go on without it)")
end
