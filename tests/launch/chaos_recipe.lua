-- The training that scripts/chaos.sh kills: two ranks, a small MLP on
-- synthetic data, with every source of state an exact resume must restore
-- (shuffled batches over several epochs, dropout from the engine's
-- generator, input noise from math.random, AdamW, a warmup-cosine schedule).
-- It saves a checkpoint every 3 of its 40 optimizer steps (automatic
-- naming, the newest two kept) and resumes the way a user's recipe would under
-- `accel-run --max-restarts K`.
--
--   accel-run chaos_recipe.lua --nproc 2 --max-restarts 3 -- RUN_DIR   (RUN_DIR must exist)
--
-- RUN_DIR/project/checkpoints/  the checkpoints
-- RUN_DIR/final/                what the main process leaves at the end:
--                               model.safetensors (acc:save_model) and
--                               state/ (a last acc:save_state)
-- RUN_DIR/starts                one line "start <ACCEL_RESTART_COUNT> from <step>"
--                               per start of the main process
--
-- CHAOS_PROGRESS_DIR (environment): on the first start only, each rank
-- writes "<pid> <step> done" to CHAOS_PROGRESS_DIR/rank-<r> after each step
-- ("<pid> <step> saving" before a save_state) and then pauses CHAOS_PACE_MS milliseconds (default 15), so that a killer
-- polling from outside can land its SIGKILL at the step it chose. The
-- pause changes no state the weights depend on; restarts are neither
-- reported nor paced, so they run at full speed.
--
-- CHAOS_ASYNC=1: every checkpoint but the last is saved with {async = true},
-- its files written in the background while training goes on.
-- CHAOS_ASYNC_KILL=R:N as well: on the first start, rank R's background
-- writer kills the rank with SIGKILL after its N-th step (a file written,
-- a marker, the manifest or the rename: ACCEL_FAULT_INJECT's
-- checkpoint-async-write, armed before any writer runs), so the kill
-- lands mid-write while the rank trains on.
local nn, optim, data = accel.nn, accel.optim, accel.data
local ffi = require("ffi")
ffi.cdef [[
int getpid(void);
int poll(void* fds, unsigned long nfds, int timeout);
int setenv(const char* name, const char* value, int overwrite);
int unsetenv(const char* name);
]]

local run_dir = assert(arg[1], "usage: chaos_recipe.lua RUN_DIR")
local total_steps, save_every = 40, 3
local restart = tonumber(os.getenv("ACCEL_RESTART_COUNT") or "0")
local progress_dir = restart == 0 and os.getenv("CHAOS_PROGRESS_DIR") or nil
local pace_ms = tonumber(os.getenv("CHAOS_PACE_MS") or "15")

local acc = accel.Accelerator{
  project_config = accel.ProjectConfiguration{
    project_dir = run_dir .. "/project", automatic_checkpoint_naming = true, total_limit = 2,
  },
}
accel.set_seed(7)
local n = 200  -- 12.5 batches of 8 per rank: epochs end with a short batch
local x = accel.randn(n, 12)
local y = accel.randint(1, 4, { n })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.25), nn.Linear(32, 3))
local opt = optim.AdamW(model:parameters(), { lr = 0.02, weight_decay = 0.01 })
local sched = optim.lr_scheduler.cosine(opt, { total = total_steps, warmup = 4 })
model, opt, loader, sched = acc:prepare(model, opt, loader, sched)
local save_options = os.getenv("CHAOS_ASYNC") == "1" and { async = true } or nil
local kill_rank, kill_at = (os.getenv("CHAOS_ASYNC_KILL") or ""):match("^(%d+):(%d+)$")
if kill_rank then
  -- A restart inherits the environment: only the first start's rank R dies.
  if restart == 0 and tonumber(kill_rank) == acc.process_index then
    ffi.C.setenv("ACCEL_FAULT_INJECT", "checkpoint-async-write@" .. kill_at, 1)
  else
    ffi.C.unsetenv("ACCEL_FAULT_INJECT")
  end
end

-- Resume. The documented pattern (docs/launch.md, "Restarts") calls
-- load_state() whenever ACCEL_RESTART_COUNT is not 0, but a rank killed
-- before the first save leaves no checkpoint and load_state() then fails on
-- every start. A restart with no complete checkpoint starts from scratch;
-- any other load error (a damaged checkpoint) still fails the run.
if restart > 0 then
  local ok, err = pcall(acc.load_state, acc)
  if ok then
    acc:print("resumed from " .. err)
  elseif tostring(err):find("no complete checkpoint", 1, true) then
    acc:print("no complete checkpoint: starting from scratch")
  else
    error(err, 0)
  end
end
if acc.is_main_process then
  local f = assert(io.open(run_dir .. "/starts", "a"))
  f:write(string.format("start %d from %d\n", restart, opt.updates))
  f:close()
end

local pid = ffi.C.getpid()
-- "<pid> <step> saving" just before a save_state, "<pid> <step> done" after
-- the step (and its save), followed by the pause. The killed rank's last
-- line tells where the kill landed.
local function report(step, phase)
  -- Written whole, then renamed over the old file, so the killer never
  -- reads a half-written line.
  local path = string.format("%s/rank-%d", progress_dir, acc.process_index)
  local f = assert(io.open(path .. ".tmp", "w"))
  f:write(string.format("%d %d %s\n", pid, step, phase))
  f:close()
  assert(os.rename(path .. ".tmp", path))
  if phase == "done" then ffi.C.poll(nil, 0, pace_ms) end
end

while opt.updates < total_steps do
  for xb, yb in loader:iter() do
    local noise = (math.random() - 0.5) * 0.2
    acc:backward(nn.functional.cross_entropy(model(xb + noise), yb))
    opt:step(); sched:step(); opt:zero_grad()
    local step = opt.updates
    if step % save_every == 0 then
      if progress_dir then report(step, "saving") end
      acc:save_state(nil, save_options)
    end
    if progress_dir then report(step, "done") end
    if step == total_steps then break end
  end
end

-- The result the chaos script compares: the weights (save_model writes
-- them in a fixed layout, so equal weights give equal bytes), and a last
-- full checkpoint (optimizer moments, schedule, generators, loader
-- positions, counters), which must equal the uninterrupted run's too.
acc:save_model(model, run_dir .. "/final")
acc:save_state(run_dir .. "/final/state")
acc:print(string.format("done at step %d", opt.updates))
acc:end_training()
