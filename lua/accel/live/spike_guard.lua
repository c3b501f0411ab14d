-- acc:spike_guard{window, factor, action, snapshots, max_rollbacks, policy}
-- (docs/live-runs.md): at each step of the Accelerator's first prepared
-- optimizer, the step's loss (the mean over ranks of what acc:backward saw
-- since the last step, one all-reduce) is compared with the mean of the
-- last `window` steps' losses; above `factor` times it (or when `policy`,
-- a Lua function, says so) the step is a spike, and every rank, holding
-- the same numbers, decides alike:
--   "skip": the optimizer step is not taken (its gradients are dropped by
--     zero_grad), as if the batch had never been seen;
--   "rollback": the step is not taken and the weights, optimizer state,
--     schedulers, generators and data loaders' positions go back to the
--     oldest of the last `snapshots` states kept in host memory (taken
--     after each step; host_snapshots.lua), at most `max_rollbacks` times,
--     after which spikes are skipped. The loaders then read the batches
--     since that state again, but never the spiked step's, so the run goes
--     on as one that never saw them.
-- Each spike is printed by the main process and logged to the trackers
-- (spike_guard/skipped, spike_guard/rollbacks) at the step's number.
local core = require("accel.core")
local args = require("accel.util.args")
local host_snapshots = require("accel.live.host_snapshots")

local dist = core.dist
local spike_guard = {}
local Guard = {}
Guard.__index = Guard

local DEFAULTS = { window = 20, factor = 3, action = "skip", snapshots = 1, max_rollbacks = 3, policy = false }

local function check_options(options)
  local where = "Accelerator:spike_guard"
  if type(options) ~= "table" then args.error(where .. ": expected an options table, got a " .. type(options)) end
  for key in pairs(options) do
    if DEFAULTS[key] == nil then args.error(string.format("%s: unknown option '%s'", where, tostring(key))) end
  end
  local o = {}
  for key, default in pairs(DEFAULTS) do o[key] = options[key] == nil and default or options[key] end
  for _, key in ipairs({ "window", "snapshots" }) do
    if type(o[key]) ~= "number" or o[key] < 1 or o[key] % 1 ~= 0 then
      args.error(string.format("%s: %s must be a whole number of at least 1, got %s", where, key, tostring(o[key])))
    end
  end
  if type(o.max_rollbacks) ~= "number" or o.max_rollbacks < 0 or o.max_rollbacks % 1 ~= 0 then
    args.error(where .. ": max_rollbacks must be a whole number of at least 0, got " .. tostring(o.max_rollbacks))
  end
  if type(o.factor) ~= "number" or o.factor <= 1 then
    args.error(where .. ": factor must be a number above 1, got " .. tostring(o.factor))
  end
  if o.action ~= "skip" and o.action ~= "rollback" then
    args.error(where .. ": action must be 'skip' or 'rollback', got " .. tostring(o.action))
  end
  if o.policy and type(o.policy) ~= "function" then
    args.error(where .. ": policy must be a function(loss, mean, step), got a " .. type(o.policy))
  end
  return o
end

function spike_guard.new(acc, options)
  local o = check_options(options)
  return setmetatable({ acc = acc, o = o, losses = {}, pending = 0, skipped = 0, rollbacks = 0,
                        snapshots = host_snapshots.new(acc, o.snapshots) }, Guard)
end

function Guard:saw_loss(loss)
  self.pending = self.pending + (type(loss) == "number" and loss or loss:detach():item())
end

-- Called by the prepared optimizer before it steps: true when this step
-- must not be taken.
function Guard:skips(opt)
  local loss = core.tensor({ self.pending }, { dtype = "float64" })
  self.pending = 0
  if self.acc.num_processes > 1 then dist.all_reduce(loss, "sum") end
  loss = loss:item() / self.acc.num_processes
  local n = #self.losses
  local sum = 0
  for _, v in ipairs(self.losses) do sum = sum + v end
  local mean = n > 0 and sum / n or nil
  local step = opt.updates + 1
  local spike
  if self.o.policy then
    spike = self.o.policy(loss, mean, step) and true or false
  else
    spike = loss ~= loss or (n >= self.o.window and loss > self.o.factor * mean)
  end
  -- A level that lasts `window` steps in a row is the new normal, not a
  -- spike (a loss that reached 0, a shift of the data): the window starts
  -- again from it, and the run is never stuck skipping.
  self.in_a_row = spike and (self.in_a_row or 0) + 1 or 0
  if spike and self.in_a_row > self.o.window then
    spike, self.in_a_row, self.losses, n = false, 0, {}, 0
  end
  if not spike then
    self.losses[n + 1] = loss
    if n + 1 > self.o.window then table.remove(self.losses, 1) end
    return false
  end
  local rollback = self.o.action == "rollback" and self.rollbacks < self.o.max_rollbacks
    and self.snapshots:restore()
  if rollback then
    -- The loss window goes back with the state: the steps read again add
    -- their losses again.
    self.losses = rollback
    self.rollbacks = self.rollbacks + 1
  else
    self.skipped = self.skipped + 1
  end
  self.acc:print(string.format("spike_guard: step %d's loss %.6g is a spike (mean of the last %d: %s); %s", step, loss,
                               n, mean and string.format("%.6g", mean) or "none",
                               rollback and ("rolled back to step " .. opt.updates) or "skipped"))
  if #self.acc.trackers > 0 then
    self.acc:log({ ["spike_guard/skipped"] = self.skipped, ["spike_guard/rollbacks"] = self.rollbacks }, step)
  end
  return true
end

-- After a step taken: a snapshot, when rollbacks may need one.
function Guard:stepped(opt)
  if self.o.action == "rollback" and not opt.step_was_skipped then
    local window = {}
    for i, v in ipairs(self.losses) do window[i] = v end
    self.snapshots:take(window)
  end
end

return spike_guard
