-- acc:spike_guard{window, factor, action, snapshots, max_rollbacks, policy}
-- (docs/live-runs.md): at each step of the Accelerator's first prepared
-- optimizer, the step's loss (the mean over ranks of what acc:backward saw
-- since the last step, one all-reduce) is compared with the mean of the
-- last `window` steps' losses; above `factor` times it (or when `policy`,
-- a Lua function, says so) the step is a spike, and every rank, holding
-- the same numbers, decides alike:
--   "skip": the optimizer step is not taken (its gradients are dropped by
--     zero_grad), as if the batch had never been seen;
--   "rollback": the step is not taken and model, optimizer, schedulers,
--     data loaders' positions are left as they are, but the weights,
--     optimizer state, schedulers and generators go back to the oldest of
--     the last `snapshots` states kept in host memory (taken after each
--     step), at most `max_rollbacks` times, after which spikes are skipped.
-- Each spike is printed by the main process and logged to the trackers
-- (spike_guard/skipped, spike_guard/rollbacks) at the step's number.
local core = require("accel.core")
local args = require("accel.util.args")
local random = require("accel.util.random")

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
  return setmetatable({ acc = acc, o = check_options(options), losses = {}, pending = 0, snapshots = {},
                        skipped = 0, rollbacks = 0 }, Guard)
end

function Guard:saw_loss(loss)
  self.pending = self.pending + (type(loss) == "number" and loss or loss:detach():item())
end

local function host_copy(tensors)
  local out = {}
  for name, t in pairs(tensors) do out[name] = t:detach():to("cpu"):clone() end
  return out
end

-- The state a rollback restores: weights, optimizer state, schedulers and
-- generators, in host memory.
function Guard:_snapshot(opt)
  local acc = self.acc
  local shot = { models = {}, schedulers = {}, updates = opt.updates, optimizer = host_copy(opt:state_dict()),
                 rng = random.get():clone(), math_rng = core.math_random_state():clone() }
  for i, entry in ipairs(acc._models) do shot.models[i] = host_copy(entry.model:state_dict()) end
  -- state_dict and load_state_dict copy the schedule's tables.
  for i, sched in ipairs(acc._schedulers) do shot.schedulers[i] = { sched:state_dict(), sched.seen } end
  table.insert(self.snapshots, shot)
  if #self.snapshots > self.o.snapshots then table.remove(self.snapshots, 1) end
end

function Guard:_restore(opt)
  local shot = self.snapshots[1]
  local acc = self.acc
  for i, entry in ipairs(acc._models) do entry.model:load_state_dict(shot.models[i]) end
  opt:load_state_dict(shot.optimizer)
  opt.updates = shot.updates
  for i, sched in ipairs(acc._schedulers) do
    sched:load_state_dict(shot.schedulers[i][1])
    sched.seen = shot.schedulers[i][2]
  end
  random.set(shot.rng)
  core.set_math_random_state(shot.math_rng)
  self.snapshots = { shot }
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
  local rollback = self.o.action == "rollback" and self.rollbacks < self.o.max_rollbacks and #self.snapshots > 0
  if rollback then
    self:_restore(opt)
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
  if self.o.action == "rollback" then self:_snapshot(opt) end
end

return spike_guard
