-- What spike_guard's rollback costs with a 100M-parameter model: the host
-- snapshot taken after every step (model + AdamW state copied into the
-- ring's buffers) and the rollback from it (copied back into the model and
-- the optimizer), timed with the guard's own ring (lua/accel/live/
-- host_snapshots.lua), next to a training step.
--   build/accel-run bench/live/rollback.lua [-- REPEATS]
-- The goal (issue 52): a rollback of the full state in under 1 s.
local host_snapshots = require("accel.live.host_snapshots")
local timing = dofile(arg[0]:match("(.*/)") .. "timing.lua")

local repeats = tonumber(arg[1] or "5")
local acc = accel.Accelerator{}
assert(acc.num_processes == 1, "run on one process: the figures are one rank's")

local model, opt, step = timing.model_100m(acc)
step()  -- AdamW's state now exists: two more tensors per parameter

local ring = host_snapshots.new(acc, 1)
local steps, takes, restores = {}, {}, {}
for i = 1, repeats + 1 do
  steps[i] = timing.seconds(step)
  takes[i] = timing.seconds(function() ring:take() end)
  step()  -- the state moves on; the rollback brings it back
  restores[i] = timing.seconds(function() assert(ring:restore()) end)
end
-- The first round allocates the ring's buffers.
local first_take = table.remove(takes, 1)
table.remove(steps, 1)
table.remove(restores, 1)

local bytes = 0
for _, t in pairs(model:state_dict()) do bytes = bytes + t:numel() * 4 end
for _, t in pairs(opt:state_dict()) do bytes = bytes + t:numel() * t:element_size() end
local step_s, take_s, restore_s = timing.median(steps), timing.median(takes), timing.median(restores)
print(string.format("parameters: %.2fM; state in a snapshot: %.0f MB (weights + AdamW); median of %d",
                    model:num_parameters() / 1e6, bytes / 1e6, repeats))
print("")
print("| what | seconds | against a step | GB/s |")
print("|---|---|---|---|")
print(string.format("| training step (batch 4) | %.3f | 1.00 | |", step_s))
print(string.format("| snapshot, first (allocates the buffers) | %.3f | %.2f | %.2f |", first_take, first_take / step_s,
                    bytes / first_take / 1e9))
print(string.format("| snapshot into the ring (after each step) | %.3f | %.2f | %.2f |", take_s, take_s / step_s,
                    bytes / take_s / 1e9))
print(string.format("| rollback from the snapshot | %.3f | %.2f | %.2f |", restore_s, restore_s / step_s,
                    bytes / restore_s / 1e9))
print("")
print(string.format("rollback: %.3f s, goal under 1 s: %s", restore_s, restore_s < 1 and "met" or "MISSED"))
