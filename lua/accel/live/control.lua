-- A live run's controller, one per Accelerator (docs/live-runs.md): at each
-- step boundary of the Accelerator's first prepared optimizer (its
-- zero_grad after a step) it takes the chunks `accel-run ctl` and `attach`
-- posted to the run's store (engine/protocol/live_control_keys.h), runs
-- them on every rank at the same step, and answers with each rank's
-- outcome. Rank 0 decides the step: a chunk it sees at boundary s runs at
-- boundary s + 1 on every rank, since no rank can pass that boundary before
-- rank 0 has written the step (each step's collectives wait for it). A
-- chunk changes the run only when it ran without error on every rank
-- (chunk_env.lua); what it changed is recorded with its step, in the run's
-- control log and in checkpoints, whose load replays it.
local core = require("accel.core")
local args = require("accel.util.args")
local status = require("accel.live.status")
-- chunk_env.lua and spike_guard.lua are required where first used: a run
-- never steered keeps the smaller Lua heap (lua/accel/init.lua says why).

local control = {}
local Controller = {}
Controller.__index = Controller

local POLL_SECONDS = 0.05

-- The Accelerator's controller, made on first use.
function control.controller(acc)
  local self = rawget(acc, "_live")
  if self then return self end
  self = setmetatable({
    acc = acc,
    hooks = {},
    changes = {},    -- {step, chunk} applied, in order: what checkpoints replay
    done = 0,        -- chunks this rank has answered
    scheduled = 0,   -- rank 0: chunks given a step
    steps = {},      -- rank 0: chunk number -> its step
    status = status.new(acc),
  }, Controller)
  acc._live = self
  return self
end

-- acc:on_control(name, fn): `accel-run ctl 'name arg ...'` calls fn(arg, ...)
-- on every rank (numbers as numbers). fn may return a function: the change
-- itself, called only once every rank's fn returned without error.
function control.on_control(acc, name, fn)
  if type(name) ~= "string" or not name:match("^[%a_][%w_]*$") then
    args.error("Accelerator:on_control: name must be a word (letters, digits, _), got " .. tostring(name))
  end
  if type(fn) ~= "function" then args.error("Accelerator:on_control: fn must be a function, got a " .. type(fn)) end
  control.controller(acc).hooks[name] = fn
end

-- acc:spike_guard{...} (spike_guard.lua): returns the guard.
function control.spike_guard(acc, options)
  local self = control.controller(acc)
  self.guard = require("accel.live.spike_guard").new(acc, options)
  return self.guard
end

-- Called by the prepared optimizer before its step: whether the guard
-- drops it.
function Controller:skips_step(opt)
  return self.guard ~= nil and opt == (self.opt or opt) and self.guard:skips(opt)
end

-- The run's keys are under live/<run>/, its number as the launcher wrote
-- it before the run started (engine/protocol/live_control_keys.h: Note
-- [one store, many runs]); "" or none: the run takes no chunks.
function Controller:_connect()
  if self.store ~= nil then return self.store end
  local store = core.live.connect()
  local run = store and store:get("live/run")
  self.store = run and run ~= "" and store or false
  self.keys = run and "live/" .. run .. "/"
  self.rank, self.world = self.acc.process_index, self.acc.num_processes
  self.timeout_ms = math.floor(((core.launch or {}).timeout or 1800) * 1000)
  return self.store
end

-- Called by the prepared optimizer's zero_grad on steps that synchronise.
function Controller:boundary(opt)
  self.opt = self.opt or opt
  if opt ~= self.opt or opt.updates == self.step then return end
  self.step = opt.updates
  self.status:saw_step(self.step)
  if self.guard then self.guard:stepped(opt) end
  local store = self:_connect()
  if not store then return end
  self.status:publish(store, self.keys, self.rank, self.step, self.opt)
  if self.world == 1 then
    self:_take_posted(self.step)
  elseif self.rank == 0 then
    while self.steps[self.done + 1] == self.step do self:_answer(self.done + 1) end
    if self.paused then return self:_wait_for_resume() end
    local posted = tonumber(store:get(self.keys .. "posted") or "0")
    for n = self.scheduled + 1, posted do
      store:set(self.keys .. "at/" .. n, tostring(self.step + 1))
      self.steps[n] = self.step + 1
    end
    self.scheduled = math.max(self.scheduled, posted)
  else
    self:_take_scheduled()
  end
  if self.paused then self:_wait_for_resume() end
end

-- One rank alone: what was posted runs now.
function Controller:_take_posted(step)
  local posted = tonumber(self.store:get(self.keys .. "posted") or "0")
  for n = self.done + 1, posted do
    self.steps[n], self.scheduled = step, n
    self:_answer(n)
  end
end

-- Ranks but 0: the chunks rank 0 gave this step.
function Controller:_take_scheduled()
  while true do
    local at = self.store:get(self.keys .. "at/" .. (self.done + 1))
    if not at then return end
    at = tonumber(at)
    if at > self.step then return end
    if at < self.step then
      error(string.format("live control: rank %d reached step %d, past step %d where control chunk %d runs: "
                            .. "its optimizer steps took no collective with rank 0", self.rank, self.step, at,
                          self.done + 1), 0)
    end
    self:_answer(self.done + 1)
  end
end

local function resumes(text)
  local word, rest = text:match("^%s*([%a_][%w_]*)%s*(.-)%s*$")
  return (word == "resume" and rest == "") or word == "stop"
end

-- Paused: chunks sent from now on wait until a `resume` (or `stop`) comes,
-- then run in order at this same step. (Those that reached the run before
-- the pause took effect ran with it.)
function Controller:_wait_for_resume()
  local store = self.store
  self.status:publish(store, self.keys, self.rank, self.step, self.opt, true)
  while self.paused do
    core.live.sleep(POLL_SECONDS)
    if self.world == 1 or self.rank == 0 then
      local posted = tonumber(store:get(self.keys .. "posted") or "0")
      for n = self.scheduled + 1, posted do
        if resumes(store:get(self.keys .. "cmd/" .. n) or "") then
          for m = self.scheduled + 1, n do
            if self.world > 1 then store:set(self.keys .. "at/" .. m, tostring(self.step)) end
            self.steps[m] = self.step
          end
          self.scheduled = n
          while self.done < n do self:_answer(self.done + 1) end
          break
        end
      end
    else
      self:_take_scheduled()
    end
  end
end

-- Every rank's "ok" or "failed" for chunk n: whether all ran it well.
function Controller:_agree(n, ok)
  if self.world == 1 then return ok, "" end
  local store = self.store
  store:set(self.keys .. "ran/" .. n .. "/" .. self.rank, ok and "ok" or "failed")
  if not store:wait_ranks(self.keys .. "ran/" .. n .. "/", self.world, self.timeout_ms) then
    error(string.format("live control: not every rank ran control chunk %d within %d s", n, self.timeout_ms / 1000), 0)
  end
  local failed = {}
  for r = 0, self.world - 1 do
    if store:get(self.keys .. "ran/" .. n .. "/" .. r) ~= "ok" then failed[#failed + 1] = r end
  end
  return #failed == 0
end

-- Runs chunk n on this rank and publishes its outcome.
function Controller:_answer(n)
  self.done = n
  local step = self.steps[n] or self.step
  local text = self.store:get(self.keys .. "cmd/" .. n) or ""
  local word, rest = text:match("^%s*([%a_][%w_]*)%s*(.-)%s*$")
  local builtin = word and control.builtins[word]
  local outcome, said, after
  if builtin and (rest == "" or word == "save" or word == "stop") then
    local ok, result, finish = pcall(builtin, self, rest ~= "" and rest or nil)
    if ok then after = finish end
    outcome, said = ok and "applied" or "failed", tostring(result or "")
  else
    local ok, values, commit = self:_prepare(text, "ctl " .. n, word, rest)
    local all = self:_agree(n, ok)
    if all then
      commit()
      self:_record(step, text)
    end
    outcome = all and "applied" or (ok and "rejected" or "failed")
    said = values
  end
  self.store:set(self.keys .. "result/" .. n .. "/" .. self.rank, outcome .. " " .. step .. "\n" .. said)
  if after then after() end
end

local function hook_arguments(rest)
  local out = {}
  for word in rest:gmatch("%S+") do out[#out + 1] = tonumber(word) or word end
  return out
end

-- Runs a hook call ("name arg ...") or a chunk without committing: ok, the
-- values as text (or the error), and the commit.
function Controller:_prepare(text, name, word, rest)
  local hook = word and self.hooks[word]
  if hook and not load(text, nil, "t") then
    local results = { xpcall(function() return hook(unpack(hook_arguments(rest))) end,
                             require("accel.live.chunk_env").traceback) }
    if not results[1] then return false, results[2] end
    local change = results[2]
    return true, "", type(change) == "function" and change or function() end
  end
  return require("accel.live.chunk_env").run(text, name, self.acc)
end

function Controller:_record(step, text)
  self.changes[#self.changes + 1] = { step = step, chunk = text }
  if self.rank ~= 0 then return end
  local line = string.format('{"step": %d, "chunk": %s}\n', step, status.json_string(text))
  for file in (self.store:get(self.keys .. "logs") or ""):gmatch("[^\n]+") do
    local f = io.open(file, "a")
    if f then
      f:write(line)
      f:close()
    end
  end
end

-- What a checkpoint keeps, and what its load replays: every change applied
-- so far, in order, run again now.
function Controller:record()
  if #self.changes == 0 then return nil end  -- checkpoints of unsteered runs stay as they were
  local out = {}
  for i, change in ipairs(self.changes) do out[i] = { step = change.step, chunk = change.chunk } end
  return out
end

function Controller:replay(changes, folder)
  if changes == nil then return end
  self.changes = {}
  for _, change in ipairs(changes) do
    local word, rest = change.chunk:match("^%s*([%a_][%w_]*)%s*(.-)%s*$")
    local ok, values, commit = self:_prepare(change.chunk, "replay of step " .. change.step, word, rest)
    if not ok then
      error(string.format("%s: the control chunk applied at step %d fails when replayed: %s", folder, change.step,
                          values), 0)
    end
    commit()
    self.changes[#self.changes + 1] = { step = change.step, chunk = change.chunk }
  end
end

function Controller:saw_backward(loss, options)
  self.status:saw_backward(loss, options)
  if self.guard then self.guard:saw_loss(loss) end
end

control.builtins = {
  pause = function(self)
    self.paused = true
    return "paused at step " .. self.step
  end,
  resume = function(self)
    self.paused = false
    return "resumed at step " .. self.step
  end,
  save = function(self, dir)
    return "saved " .. tostring(self.acc:save_state(dir))
  end,
  -- Saves, answers, then ends the recipe on every rank as if it returned
  -- there (bindings/end_of_run.h): a warm worker goes on serving.
  stop = function(self, dir)
    local folder = self.acc:save_state(dir)
    self.paused = false
    return "saved " .. tostring(folder) .. "; stopping at step " .. self.step, core.live.end_run
  end,
}

return control
