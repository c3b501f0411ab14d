-- Loads the benchmark's checkpoint into a model built under
-- init_empty_weights and runs one forward, printing the load and forward
-- times, the weights kept in memory and the peak RSS (VmHWM) after the forward:
--   accel-run bench/big_model/load.lua -- FOLDER [MAX_MEMORY]
-- With MAX_MEMORY, device_map = "auto" keeps that much in memory and
-- offloads the rest to disk.
local build = dofile(arg[0]:match("(.*/)") .. "model.lua")
local folder = arg[1] or error("usage: accel-run bench/big_model/load.lua -- FOLDER [MAX_MEMORY]")
local max_memory = arg[2]

local status_kib = dofile(arg[0]:match("(.*/)") .. "../workloads/bench.lua").status_kib

local rss_start = status_kib("VmRSS") * 1024
local model = accel.init_empty_weights(build)
local start = accel.time()
local options = max_memory and { device_map = "auto", max_memory = { cpu = tonumber(max_memory) or max_memory } } or nil
local _, map = accel.load_checkpoint_and_dispatch(model, folder, options)
local load_s = accel.time() - start
local kept = accel.tensor_bytes()
print(string.format("load: %.2f s, weights kept in memory %.1f MiB, peak RSS %.1f MiB (%.1f MiB at start)", load_s,
                    kept / 2 ^ 20, status_kib("VmHWM") / 1024, rss_start / 2 ^ 20))
if max_memory then
  local on_disk = 0
  for _, device in pairs(map) do if device == "disk" then on_disk = on_disk + 1 end end
  print(string.format("device map: %d entries on disk", on_disk))
end
accel.manual_seed(1)
local x = accel.randn(8, 4096)
start = accel.time()
local y = accel.no_grad(function() return model(x) end)
local forward_s = accel.time() - start
-- Mapped weights are read during the first forward: the peak that counts is after it.
local peak = status_kib("VmHWM") * 1024
print(string.format("forward: %.2f s (load and forward %.2f s), output sum %.6f, peak RSS %.1f MiB, "
                    .. "peak over start / kept = %.3f", forward_s, load_s + forward_s, y:sum():item(), peak / 2 ^ 20,
                    (peak - rss_start) / math.max(kept, 1)))
