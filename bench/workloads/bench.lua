-- What the workload recipes share with their C++ and Python twins
-- (bench/cpp/bench_common.h, bench/python/common.py): the recipe arguments
-- (warm-up steps, steps per window, windows), the timed loop over epochs
-- and the BENCH line bench/python/harness.py reads. Loaded by each recipe
-- with dofile, next to it (and by sharding_memory/ and big_model/ for
-- status_kib).
local bench = {}

function bench.config()
  local function count(i, default)
    return math.max(1, math.floor(tonumber(arg[i]) or default))
  end
  return { warmup = count(1, 20), window = count(2, 50), windows = count(3, 5) }
end

-- A field of /proc/self/status in KiB (VmRSS, VmHWM), -1 when absent.
function bench.status_kib(field)
  for line in io.lines("/proc/self/status") do
    local value = line:match("^" .. field .. ":%s*(%d+)")
    if value then return tonumber(value) end
  end
  return -1
end

-- The BLAS library this process mapped (what libblas.so.3 resolved to).
local function loaded_blas()
  for line in io.lines("/proc/self/maps") do
    local path = line:match("(/%S*/[^/%s]*blas[^/%s]*)$")  -- not liblapack in a blas folder
    if path then return path end
  end
  return "none"
end

-- Trains with `step(x, y) -> loss` (a number or a tensor, read with item()
-- after each step as the twins do) over `loader` until warm-up + window *
-- windows steps have run, epoch after epoch, and prints the BENCH line:
-- samples per second of each window (all ranks), the monotonic time the
-- first step finished, the mean loss of the last window, peak memory, the
-- device of the batches and, on a GPU, the allocator's peak in MiB.
-- With ACCEL_BENCH_PROFILE=FILE, the 5 steps after the warm-up are traced
-- (acc:profile) into FILE, as bench/python/common.py traces PyTorch's.
function bench.train(acc, loader, step)
  local trace = os.getenv("ACCEL_BENCH_PROFILE")
  if not trace then return bench.loop(acc, loader, step) end
  local c = bench.config()
  local paths = acc:profile(function(prof) bench.loop(acc, loader, step, prof) end, {
    output = trace .. ".d",
    schedule = { skip_first = math.max(0, c.warmup - 2), warmup = math.min(2, c.warmup), active = 5, ["repeat"] = 1 },
  })
  assert(os.rename(paths[1], trace))
  os.remove(trace .. ".d")
end

function bench.loop(acc, loader, step, prof)
  local c = bench.config()
  local total = c.warmup + c.window * c.windows
  local world = acc.num_processes
  local steps, first_step, window_start, window_samples, loss_sum = 0, 0, 0, 0, 0
  local windows = {}
  local device = "none"
  while steps < total do
    for x, y in loader:iter() do
      local loss = step(x, y)
      if type(loss) ~= "number" then loss = loss:item() end
      if prof then prof:step() end
      steps = steps + 1
      if steps == 1 then first_step, device = accel.time(), tostring(x.device) end
      if steps == c.warmup then
        window_start = accel.time()
      elseif steps > c.warmup then
        window_samples = window_samples + x:size(1)
        if (steps - c.warmup) % c.window == 0 then
          local t = accel.time()
          windows[#windows + 1] = string.format("%.10g", window_samples * world / (t - window_start))
          window_start, window_samples = t, 0
        end
      end
      if steps > total - c.window then loss_sum = loss_sum + loss end
      if steps == total then break end
    end
  end
  -- accel.cuda exists only in builds with the GPU code paths.
  local gpu = ""
  if accel.cuda and accel.cuda.is_available and accel.cuda.is_available() then
    gpu = string.format(', "gpu_mib": %.10g', accel.cuda.max_memory_allocated() / 2 ^ 20)
  end
  print(string.format('BENCH {"rank": %d, "world": %d, "first_step": %.10g, "windows": [%s], "loss": %.10g, '
                      .. '"vmhwm_kib": %d, "blas": "%s", "device": "%s"%s}', acc.process_index, world, first_step,
                      table.concat(windows, ", "), loss_sum / c.window, bench.status_kib("VmHWM"), loaded_blas(), device,
                      gpu))
end

return bench
