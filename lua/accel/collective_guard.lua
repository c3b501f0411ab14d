-- Runs the part of a collective helper that every rank must finish alike.
-- An error there, raised on one rank only, cannot be caught and carried on
-- from: the other ranks are in, or about to enter, a collective this rank
-- will not join, and would wait out the collective timeout (or pair the
-- collective with a different one). So with more than one rank such an
-- error ends this rank at once, reported as its failure (message and
-- traceback in the launcher's report), and the launcher stops the others.
--
-- Errors that every rank raises at the same point, having exchanged what
-- they know (different numbers of dims in pad_across_processes, tables
-- whose keys differ under --debug, the engine's --debug mismatch of shapes),
-- leave no rank behind: they are raised with guard.raise_together (or carry
-- the engine's --debug suffix) and stay catchable, as are argument errors
-- checked before the guard.
--   guard(world, fn, ...)           fn(...)'s results
--   guard.raise_together(message)   raises message at the recipe's line
local core = require("accel.core")
local args = require("accel.util.args")

local guard = {}
local together = false  -- the error being raised was raised on every rank

function guard.raise_together(message)
  together = true
  args.error(message)
end

-- The engine's --debug check (engine/comm/checked_communicator.cpp) compares
-- every rank's call and fails all of them at once, with this suffix.
local debug_mismatch = "(checked because of --debug)"

local function handler(e)
  if together or (type(e) == "string" and e:find(debug_mismatch, 1, true)) then
    together = false
    return { agreed = true, message = e }
  end
  return { message = debug.traceback(e, 2) }
end

local function run(world, fn, ...)
  if world.size == 1 then return fn(...) end
  together = false  -- raised outside a guard, the last raise_together set it for nothing
  local results = { xpcall(fn, handler, ...) }
  if results[1] then return unpack(results, 2, table.maxn(results)) end
  local failure = results[2]
  if failure.agreed then error(failure.message, 0) end
  io.stdout:flush()
  core.dist.exit_with_error(tostring(failure.message) .. "\n(an error inside a collective helper ends its rank: "
                            .. "the other ranks cannot go on without it)")
end

return setmetatable(guard, { __call = function(_, ...) return run(...) end })
