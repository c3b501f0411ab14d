-- Checkpoints that do not stop training, with a 100M-parameter model and
-- AdamW (1.2 GB of state): the step time while acc:save_state(dir, {async
-- = true}) writes in the background against a step without any save, the
-- stall of the asynchronous call itself (the state staged to host memory
-- and checksummed) and the stall of a synchronous save_state, in
-- alternating rounds so that drift of the machine falls on all alike.
--   build/accel-run bench/live/async_save.lua [-- ROUNDS FOLDER]
-- FOLDER (default /tmp/accel_bench_async_save) is on the disk to measure.
-- The goal (issue 52): steps while the save runs within 1.2x of a step
-- without, against the synchronous save's stall of a second or more.
local core = require("accel.core")
local timing = dofile(arg[0]:match("(.*/)") .. "timing.lua")

local rounds = tonumber(arg[1] or "3")
local folder = arg[2] or "/tmp/accel_bench_async_save"
local acc = accel.Accelerator{}
assert(acc.num_processes == 1, "run on one process: the figures are one rank's")
local ck = core.formats
ck.make_empty_folder(folder)

local model, opt, step = timing.model_100m(acc)
for _ = 1, 3 do step() end

local plain, writing, staging, sync, write_s = {}, {}, {}, {}, {}
for round = 1, rounds do
  for _ = 1, 5 do plain[#plain + 1] = timing.seconds(step) end
  local dir = string.format("%s/async_%d", folder, round)
  local start = accel.time()
  staging[round] = timing.seconds(function() acc:save_state(dir, { async = true }) end)
  local writer = acc._checkpoint_pending.writer
  while not writer:finished() do
    writing[#writing + 1] = timing.seconds(step)
  end
  acc:wait_for_checkpoint()
  write_s[round] = accel.time() - start
  ck.remove_folder(dir)
  dir = string.format("%s/sync_%d", folder, round)
  sync[round] = timing.seconds(function() acc:save_state(dir) end)
  ck.remove_folder(dir)
end
ck.remove_folder(folder)

local step_s, writing_s = timing.median(plain), timing.median(writing)
print(string.format("parameters: %.2fM; model + AdamW state; %d rounds; medians (min-max)", model:num_parameters() / 1e6,
                    rounds))
print("")
local function range(values)
  local lo, hi = math.huge, 0
  for _, v in ipairs(values) do lo, hi = math.min(lo, v), math.max(hi, v) end
  return string.format("%.3f (%.3f-%.3f)", timing.median(values), lo, hi)
end
print("| what | seconds | against a step without a save |")
print("|---|---|---|")
print(string.format("| step without a save (batch 4) | %s | 1.00 |", range(plain)))
print(string.format("| step while the async save writes (%d steps) | %s | %.2f |", #writing, range(writing),
                    writing_s / step_s))
print(string.format("| save_state(dir, {async = true}) call: staging | %s | %.2f |", range(staging),
                    timing.median(staging) / step_s))
print(string.format("| async save, from the call to committed | %s | %.2f |", range(write_s),
                    timing.median(write_s) / step_s))
print(string.format("| save_state(dir), synchronous: the stall | %s | %.2f |", range(sync),
                    timing.median(sync) / step_s))
print("")
local ratio = writing_s / step_s
print(string.format("step while writing / step without: %.2fx, goal at most 1.2x: %s; synchronous stall %.2f s, "
                    .. "async call %.2f s", ratio, ratio <= 1.2 and "met" or "MISSED", timing.median(sync),
                    timing.median(staging)))
