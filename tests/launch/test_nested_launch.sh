# accel-run started from inside a recipe is an ordinary launch: the worker
# took its launcher's hand-off out of its environment once read, and a
# launcher drops the run settings it inherited before setting its own
# (engine/protocol/worker_variables.h), so a nested run, `accel-run env` and
# `accel-run plot` from a rank behave as from a shell, and the outer run is
# not disturbed; the recipe still reads its run's settings.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/inner.lua" <<'LUA'
local acc = accel.Accelerator{}
local total = acc:reduce(accel.tensor({ acc.process_index + 1 }), "sum"):item()
acc:print(string.format("inner: %d ranks, total %d, precision %s", acc.num_processes, total,
  tostring(os.getenv("ACCEL_MIXED_PRECISION"))))
LUA
cat >"$work/outer.lua" <<'LUA'
local accel_run, dir = arg[1], arg[2]
local acc = accel.Accelerator{}
acc:wait_for_everyone()
if acc.is_main_process then
  local function run(command, out)
    local status = os.execute(command .. " >" .. out .. " 2>&1")  -- LuaJIT: the wait status
    print(string.format("%s exited %d", out:match("[^/]+$"), math.floor(status / 256)))
  end
  run(accel_run .. " " .. dir .. "/inner.lua --nproc 2 --threads 1", dir .. "/nested.out")
  run(accel_run .. " env", dir .. "/env.out")
  run(accel_run .. " plot " .. dir .. "/no-such-run -o " .. dir .. "/loss.png", dir .. "/plot.out")
  local inherited = os.getenv("ACCEL_ROLE") or os.getenv("ACCEL_ERROR_FILE") or os.getenv("ACCEL_RDZV_TOKEN")
  print("launcher variables left: " .. tostring(inherited))
  print("torchrun's kept: RANK=" .. tostring(os.getenv("RANK")) .. " WORLD_SIZE=" .. tostring(os.getenv("WORLD_SIZE")))
  print("settings kept: ACCEL_MIXED_PRECISION=" .. tostring(os.getenv("ACCEL_MIXED_PRECISION")))
end
local again = acc:reduce(accel.tensor({ 1 }), "sum"):item()
acc:print("outer collective after: " .. again)
LUA

run_accel "$work/outer.lua" --nproc 2 --threads 1 --mixed-precision bf16 -- "$accel_run" "$work"
expect "the outer run finishes" [ "$status" -eq 0 ]
expect "a nested run is a run of its own" grep -q "inner: 2 ranks, total 3" "$work/nested.out"
expect "with its own settings, not the outer run's" grep -q "precision nil" "$work/nested.out"
expect "it exits 0" contains "$out" "nested.out exited 0"
expect "accel-run env from a rank prints its report" grep -q "^accel: " "$work/env.out"
expect "accel-run plot from a rank says what is wrong, on its stderr" grep -q "no-such-run" "$work/plot.out"
expect "and exits 2" contains "$out" "plot.out exited 2"
expect "the worker kept none of the launcher's hand-off" contains "$out" "launcher variables left: nil"
expect "but the run's settings, which recipes read" contains "$out" "settings kept: ACCEL_MIXED_PRECISION=bf16"
expect "but torchrun's contract" contains "$out" "torchrun's kept: RANK=0 WORLD_SIZE=2"
expect "the outer run's collectives go on" contains "$out" "outer collective after: 2"
expect "nothing of the nested runs reached the outer report" [ -z "$err" ]
finish
