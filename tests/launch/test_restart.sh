# --max-restarts: after rank 1 dies (SIGKILL) at step 30 of 40, all workers
# restart with ACCEL_RESTART_COUNT=1, the recipe resumes from its newest
# complete checkpoint, and the run ends with the same final weights as an
# uninterrupted one. Without restarts the same run fails; a run that keeps
# failing gives up after K restarts with the last failure's exit code.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"  # no default config of the machine's user

cat >"$work/resume.lua" <<'LUA'
-- accel-run resume.lua --nproc 2 -- PROJECT_DIR [DIE_AT]
-- Saves a checkpoint every 10 optimizer steps; on a restart it resumes
-- from the newest. On the first start rank 1 kills itself at step DIE_AT,
-- before that step's checkpoint. Prints every final weight exactly.
local nn, optim, data = accel.nn, accel.optim, accel.data
local project_dir, die_at = arg[1], tonumber(arg[2] or "0")
local restart = tonumber(os.getenv("ACCEL_RESTART_COUNT"))
local total_steps = 40

local acc = accel.Accelerator{
  project_config = accel.ProjectConfiguration{
    project_dir = project_dir, automatic_checkpoint_naming = true, total_limit = 2,
  },
}
accel.set_seed(5)
local x, y = accel.randn(256, 8), accel.randint(1, 5, { 256 })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 4))
local opt = optim.AdamW(model:parameters(), { lr = 0.01 })
model, opt, loader = acc:prepare(model, opt, loader)
acc:print("start " .. restart)
if restart > 0 then acc:print("resumed from " .. acc:load_state()) end

while opt.updates < total_steps do
  for xb, yb in loader:iter() do
    acc:backward(nn.functional.cross_entropy(model(xb), yb))
    opt:step(); opt:zero_grad()
    local step = opt.updates
    if step == die_at and restart == 0 and acc.process_index == 1 then
      os.execute("kill -9 " .. io.open("/proc/self/stat"):read("*l"):match("^(%d+)"))
    end
    if step % 10 == 0 then acc:save_state() end
    if step == total_steps then break end
  end
end
for name, p in model:named_parameters() do
  local values = {}
  for i, v in ipairs(p:detach():reshape(-1):totable()) do values[i] = string.format("%.17g", v) end
  acc:print("weight " .. name .. " " .. table.concat(values, " "))
end
LUA

run_accel "$work/resume.lua" --nproc 2 -- "$work/straight"
grep '^weight ' "$work/out" >"$work/straight.weights"
expect "uninterrupted run exits 0" [ "$status" -eq 0 ]
expect "uninterrupted run printed its weights" [ -s "$work/straight.weights" ]

run_accel "$work/resume.lua" --nproc 2 -- "$work/once" 30
expect "without --max-restarts the crash ends the run (128+9)" [ "$status" -eq 137 ]
expect "without --max-restarts rank 1 is the culprit" contains "$err" "rank 1 was killed by signal 9"

start=$SECONDS
run_accel "$work/resume.lua" --nproc 2 --max-restarts 1 -- "$work/restarted" 30
grep '^weight ' "$work/out" >"$work/restarted.weights"
expect "with --max-restarts 1 the run exits 0" [ "$status" -eq 0 ]
expect "the crash was reported" contains "$err" "rank 1 was killed by signal 9"
expect "the launcher said it restarts" contains "$err" "accel-run: restarting all workers (restart 1 of 1)"
expect "workers saw ACCEL_RESTART_COUNT 0, then 1" \
  [ "$(grep '^start ' "$work/out" | tr '\n' ' ')" = "start 0 start 1 " ]
expect "the restart resumed from the step-20 checkpoint" \
  contains "$out" "resumed from $work/restarted/checkpoints/checkpoint_1"
expect "final weights equal the uninterrupted run's, digit for digit" \
  cmp -s "$work/straight.weights" "$work/restarted.weights"
echo "restarted run: ${elapsed}s"

# A recipe that fails on every start: two restarts, then its exit code.
# Rank 1 fails only once rank 0 has printed (the barrier): otherwise the
# launcher may stop rank 0 before its line, and a start goes uncounted.
printf 'local acc = accel.Accelerator{}\nacc:print("start " .. os.getenv("ACCEL_RESTART_COUNT"))\nacc:wait_for_everyone()\nif acc.process_index == 1 then os.exit(3) end\nacc:wait_for_everyone()\n' >"$work/always.lua"
run_accel "$work/always.lua" --nproc 2 --max-restarts 2
expect "a failure on every start gives up with its exit code" [ "$status" -eq 3 ]
expect "it started three times" [ "$(grep -c '^start ' "$work/out")" -eq 3 ]
expect "it restarted twice" [ "$(grep -c 'restarting all workers' "$work/err")" -eq 2 ]
expect "no process left" no_survivors

finish
