-- The Lua half of bench/op_overhead: times small tensor ops called from a
-- recipe, in `windows` equal windows of calls. Prints one line per op,
-- "lua <name>\t<fastest window>\t<median window>" in nanoseconds per call,
-- which the C++ half (op_overhead.cpp) reads; alone it runs as
--   ACCEL_THREADS=1 accel-run bench/op_overhead/op_overhead.lua -- [calls [windows]]
local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } accel_bench_timespec;
  int clock_gettime(int clock, accel_bench_timespec* ts);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("accel_bench_timespec")
local function now()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local calls = tonumber(arg[1] or "1000000")
local windows = tonumber(arg[2] or "10")
local per_window = math.max(1, math.floor(calls / windows))
accel.set_num_threads(1)
local a, b = accel.randn(16), accel.randn(16)

-- Each loop is what a recipe would write; results go to a local so nothing
-- is optimised away.
local ops = {
  { "a + b", function(n) local c; for _ = 1, n do c = a + b end; return c end },
  { "a:mul(b)", function(n) local c; for _ = 1, n do c = a:mul(b) end; return c end },
  { "a:sum()", function(n) local c; for _ = 1, n do c = a:sum() end; return c end },
}

for _, op in ipairs(ops) do
  local name, loop = op[1], op[2]
  loop(math.max(1, math.floor(calls / 10)))  -- warm up: JIT traces, allocator
  collectgarbage()
  local per_call = {}
  for window = 1, windows do
    local start = now()
    loop(per_window)
    per_call[window] = (now() - start) * 1e9 / per_window
  end
  table.sort(per_call)
  print(string.format("lua %s\t%.1f\t%.1f", name, per_call[1], per_call[math.ceil(windows / 2)]))
end
