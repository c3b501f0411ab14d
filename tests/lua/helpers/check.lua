-- Assertions for the Lua API tests. A failed check raises an error naming
-- the check and both values; the test's rank then fails the run.
--   local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local check = { passed = 0 }

local function fail(message, level)
  error(message, (level or 2) + 1)
end

local function as_table(v)
  if type(v) == "userdata" then return v:totable() end
  return v
end

local function flatten(v, out)
  out = out or {}
  if type(v) == "table" then
    for _, x in ipairs(v) do flatten(x, out) end
  else
    out[#out + 1] = v
  end
  return out
end

-- Values (numbers, tensors or nested tables) equal within `tol` elementwise.
function check.near(actual, expected, tol, what)
  tol = tol or 1e-6
  local a, e = flatten(as_table(actual)), flatten(as_table(expected))
  if #a ~= #e then
    fail(string.format("%s: %d values, expected %d", what or "near", #a, #e))
  end
  for i = 1, #a do
    local x, y = a[i], e[i]
    if type(x) == "boolean" or type(y) == "boolean" then
      if x ~= y then fail(string.format("%s: value %d is %s, expected %s", what or "near", i, tostring(x), tostring(y))) end
    elseif math.abs(x - y) > tol * math.max(1, math.abs(y)) then
      fail(string.format("%s: value %d is %.9g, expected %.9g (tolerance %g)", what or "near", i, x, y, tol))
    end
  end
  check.passed = check.passed + 1
end

function check.equal(actual, expected, what)
  if actual ~= expected then
    fail(string.format("%s: got %s, expected %s", what or "equal", tostring(actual), tostring(expected)))
  end
  check.passed = check.passed + 1
end

function check.truthy(value, what)
  if not value then fail((what or "truthy") .. ": was " .. tostring(value)) end
  check.passed = check.passed + 1
end

-- fn() must raise an error whose message contains every plain substring given.
function check.raises(fn, what, ...)
  local ok, err = pcall(fn)
  if ok then fail((what or "raises") .. ": no error was raised") end
  err = tostring(err)
  for _, needle in ipairs({ ... }) do
    if not err:find(needle, 1, true) then
      fail(string.format("%s: error %q does not mention %q", what or "raises", err, needle))
    end
  end
  check.passed = check.passed + 1
  return err
end

-- Prints the closing line; rank 0 only, so multi-rank tests print it once.
-- The name of this run of a test registered at several rank counts
-- (`-- nproc: 2 3`, tests/CMakeLists.txt): "test_sharding_3ranks".
function check.run_name(base)
  local n = tonumber(os.getenv("WORLD_SIZE") or "1")
  return base .. "_" .. n .. (n == 1 and "rank" or "ranks")
end

function check.done(name)
  local rank = tonumber(os.getenv("RANK") or "0")
  if rank == 0 then print(string.format("%s: %d passed, 0 failed", name, check.passed)) end
end

return check
