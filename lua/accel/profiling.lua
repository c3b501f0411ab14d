-- Accelerator:profile(fn, options): a Chrome/Perfetto trace of what fn runs,
-- from LibTorch's profiler (engine/profiler.h), as Accelerate's profile()
-- with its ProfileKwargs:
--   local traces = acc:profile(function(prof)
--     for step = 1, 8 do train_step(); prof:step() end
--   end, { activities = {"cpu", "cuda"}, schedule = {wait = 1, warmup = 1, active = 3},
--          record_shapes = true, output = "traces" })
-- Options: activities ("cpu", "cuda"; both where the Accelerator computes
-- on a GPU, else "cpu"), schedule {wait, warmup, active, repeat = 0,
-- skip_first = 0} (torch.profiler.schedule's: after skip_first steps, cycles
-- of `wait` steps unrecorded, `warmup` steps with the profiler ready but not
-- recording, `active` steps recorded; `repeat` cycles, 0 for as many as fn
-- runs), record_shapes, profile_memory, with_stack, with_flops, output (the
-- folder, "profile" by default). Without a schedule the whole of fn is
-- recorded. fn gets the profiler, whose step() marks the end of a step.
-- Each rank writes <output>/profile_<rank>.json for the first recorded
-- cycle (Accelerate's name) and profile_<rank>_<k>.json for cycle k > 1,
-- and returns the paths it wrote; an error in fn stops the profiler,
-- writes nothing and is raised again.
local core = require("accel.core")
local args = require("accel.util.args")

local WHERE = "Accelerator:profile"

local option_defaults = { activities = args.NONE, schedule = args.NONE, record_shapes = false,
                          profile_memory = false, with_stack = false, with_flops = false, output = "profile" }
local option_types = { activities = "table", schedule = "table", record_shapes = "boolean",
                       profile_memory = "boolean", with_stack = "boolean", with_flops = "boolean",
                       output = "string" }

local function activities_of(acc, given)
  local on = { cpu = given == nil, cuda = given == nil and acc.device:sub(1, 4) == "cuda" }
  for _, name in ipairs(given or {}) do
    if on[name] == nil then
      args.error(string.format("%s: unknown activity '%s' (known: cpu, cuda)", WHERE, tostring(name)))
    end
    on[name] = true
  end
  return on
end

local function schedule_of(given)
  if given == nil then return nil end
  local s = args.options(WHERE .. " schedule", given,
                         { wait = 0, warmup = 0, active = 1, ["repeat"] = 0, skip_first = 0 },
                         { wait = "number", warmup = "number", active = "number", ["repeat"] = "number",
                           skip_first = "number" })
  for _, key in ipairs({ "wait", "warmup", "repeat", "skip_first" }) do
    if s[key] < 0 or s[key] % 1 ~= 0 then
      args.error(string.format("%s: schedule.%s must be a whole number >= 0, got %s", WHERE, key, tostring(s[key])))
    end
  end
  args.positive_integer(WHERE, "schedule.active", s.active)
  return s
end

-- What the schedule does at step `n` (0-based): "none", "warmup" or
-- "record", and whether n is the last recorded step of its cycle.
local function action(s, n)
  if n < s.skip_first then return "none" end
  n = n - s.skip_first
  local cycle = s.wait + s.warmup + s.active
  if s["repeat"] > 0 and math.floor(n / cycle) >= s["repeat"] then return "none" end
  local at = n % cycle
  if at < s.wait then return "none" end
  if at < s.wait + s.warmup then return "warmup" end
  return "record", at == cycle - 1
end

local Session = {}
Session.__index = Session

function Session:_save()
  self.cycles = self.cycles + 1
  local name = self.cycles == 1 and string.format("profile_%d.json", self.rank)
               or string.format("profile_%d_%d.json", self.rank, self.cycles)
  local path = self.output .. "/" .. name
  self.profiler:stop(path)
  self.paths[#self.paths + 1] = path
end

-- Enters what the schedule says of the current step.
function Session:_enter()
  if not self.schedule then return end
  local what = action(self.schedule, self.steps)
  if what == "warmup" and not self.warm then
    self.profiler:warm_up()
    self.warm = true
  elseif what == "record" and not self.profiler:recording() then
    self.profiler:start()
    self.warm = false
  end
end

-- The end of a step: saves the trace when it ends a recorded cycle.
function Session:step()
  if self.schedule then
    local what, last = action(self.schedule, self.steps)
    if what == "record" and last then self:_save() end
  end
  self.steps = self.steps + 1
  self:_enter()
end

return function(Accelerator)
  function Accelerator:profile(fn, options)
    if type(fn) ~= "function" then
      args.error(string.format("%s: expected a function to profile, got a %s", WHERE, type(fn)))
    end
    local o = args.options(WHERE, options, option_defaults, option_types)
    local on = activities_of(self, o.activities)
    local session = setmetatable({
      profiler = core.profiler.new({ cpu = on.cpu, cuda = on.cuda, record_shapes = o.record_shapes,
                                     profile_memory = o.profile_memory, with_stack = o.with_stack,
                                     with_flops = o.with_flops }),
      schedule = schedule_of(o.schedule), output = o.output, rank = self.process_index,
      steps = 0, cycles = 0, warm = false, paths = {},
    }, Session)
    if session.schedule then session:_enter() else session.profiler:start() end
    local ok, err = pcall(fn, session)
    if not ok then
      session.profiler:discard()
      error(err, 0)
    end
    if session.profiler:recording() then session:_save() end
    return session.paths
  end
end
