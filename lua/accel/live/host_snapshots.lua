-- The last K states of an Accelerator's training, in host memory, for
-- spike_guard's rollback (docs/live-runs.md): after each step taken, the
-- prepared models' weights and buffers, the optimizers' state and update
-- counts, the schedulers, the fp16 loss scaler, the engine's and
-- math.random's generators and the prepared data loaders' positions.
-- The K snapshots are a ring whose tensors are allocated once and then
-- overwritten by copy_ (a 100M-parameter model with AdamW is 1.2 GB a
-- snapshot: allocating it at every step would cost more than copying it).
local core = require("accel.core")
local args = require("accel.util.args")
local random = require("accel.util.random")

local host_snapshots = {}
local Ring = {}
Ring.__index = Ring

function host_snapshots.new(acc, count)
  return setmetatable({ acc = acc, count = count, shots = {} }, Ring)
end

-- Copies `tensors` (name -> tensor) into `buffers`, reusing each buffer of
-- the same shape and dtype.
local function copy_into(buffers, tensors)
  buffers = buffers or {}
  core.no_grad(function()
    for name, t in pairs(tensors) do
      local b = buffers[name]
      if b and b.dtype == t.dtype and args.shape(b) == args.shape(t) then
        b:copy_(t)
      else
        buffers[name] = t:detach():to("cpu"):clone()
      end
    end
  end)
  for name in pairs(buffers) do
    if tensors[name] == nil then buffers[name] = nil end
  end
  return buffers
end

-- Puts `saved` (a snapshot of o:state_dict()) back into the optimizer `o`:
-- copied into its state tensors in place (state_dict aliases them; new
-- ones would cost a page fault per 4 KiB), the groups' options set; a
-- sharded optimizer, whose state_dict is gathered, or one whose state has
-- other keys or shapes now, loads it as a checkpoint does.
local function restore_optimizer(o, saved)
  local live = not o:_gathers_state() and o:state_dict()
  local same = live and true
  for name, t in pairs(live or {}) do
    same = same and saved[name] ~= nil and args.shape(saved[name]) == args.shape(t)
  end
  for name in pairs(same and saved or {}) do same = same and live[name] ~= nil end
  if not same then return o:load_state_dict(saved) end
  core.no_grad(function()
    for name, t in pairs(live) do
      local group, option = name:match("^param_groups%.(%d+)%.([%w_]+)$")
      if not group then
        t:copy_(saved[name])
      elseif option ~= "params" then
        o:set_option(option, saved[name]:item(), tonumber(group) + 1)
      end
    end
  end)
end

-- After a step taken: a snapshot, in the buffers of the oldest one once
-- the ring is full. `extra`, a value of the caller's, comes back with it.
function Ring:take(extra)
  local acc = self.acc
  local shot = #self.shots >= self.count and table.remove(self.shots, 1)
    or { models = {}, optimizers = {}, schedulers = {}, loaders = {} }
  for i, entry in ipairs(acc._models) do shot.models[i] = copy_into(shot.models[i], entry.model:state_dict()) end
  for i, opt in ipairs(acc._optimizers) do
    shot.optimizers[i] = { state = copy_into((shot.optimizers[i] or {}).state, opt:state_dict()),
                           updates = opt.updates }
  end
  -- state_dict and load_state_dict copy the schedule's tables.
  for i, sched in ipairs(acc._schedulers) do shot.schedulers[i] = { sched:state_dict(), sched.seen } end
  for i, loader in ipairs(acc._dataloaders) do shot.loaders[i] = loader:_position() or false end
  shot.scaler = acc.gradient_state:state_dict().scaler
  shot.rng = copy_into(shot.rng, { engine = random.get(), math = random.get_math_random() })
  shot.extra = extra
  self.shots[#self.shots + 1] = shot
end

-- Whether every prepared loader can be brought back to the snapshot's
-- positions: each one reads the same epoch as then (or is read round by
-- round and has not moved, which only the newest snapshot promises).
local function rewindable(acc, shot)
  for i, loader in ipairs(acc._dataloaders) do
    local then_, now = shot.loaders[i], loader:_position()
    if not then_ or not now or then_.epoch ~= now.epoch or then_.start ~= now.start then return false end
  end
  return true
end

-- Rolls the training back to the oldest snapshot the loaders can go back
-- to (else the newest, as a skip does); the batches read since the newest
-- snapshot (the spiked step's) are never read again, the others since the
-- chosen one are read again. Returns the snapshot's `extra` (true without
-- one), or nil without a snapshot.
function Ring:restore()
  local n = #self.shots
  if n == 0 then return nil end
  local acc, chosen = self.acc, n
  for i = 1, n - 1 do
    if rewindable(acc, self.shots[i]) then chosen = i break end
  end
  local shot, newest = self.shots[chosen], self.shots[n]
  for i, entry in ipairs(acc._models) do entry.model:load_state_dict(shot.models[i]) end
  for i, o in ipairs(acc._optimizers) do
    restore_optimizer(o, shot.optimizers[i].state)
    o.updates = shot.optimizers[i].updates
  end
  for i, sched in ipairs(acc._schedulers) do
    sched:load_state_dict(shot.schedulers[i][1])
    sched.seen = shot.schedulers[i][2]
  end
  local scaler = acc.gradient_state.scaler
  if scaler and shot.scaler then scaler:load(shot.scaler.scale, shot.scaler.growth_tracker) end
  random.set(shot.rng.engine)
  random.set_math_random(shot.rng.math)
  for i, loader in ipairs(acc._dataloaders) do
    local then_, last, now = shot.loaders[i], newest.loaders[i], loader:_position()
    if then_ and last and now and last.epoch == now.epoch then loader:_rewind(then_, last.done) end
  end
  -- The snapshots after the chosen one are of steps undone.
  for i = n, chosen + 1, -1 do self.shots[i] = nil end
  return shot.extra == nil or shot.extra
end

return host_snapshots
