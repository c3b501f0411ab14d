# --debug and --timeout: a shape mismatch in a gather fails at once, naming
# both shapes and the recipe line; ranks calling different collectives are
# named; a rank that never reaches a collective fails the run at the
# timeout, naming the operation, its line and the rank that did not arrive.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/gather_mismatch.lua" <<'LUA'
local acc = accel.Accelerator{}
local rows = acc.process_index + 2   -- rank 0: 2 rows, rank 1: 3 rows
local all = acc:gather(accel.zeros(rows, 3))
print("gathered " .. all:size(1) .. " rows")
LUA
run_accel "$work/gather_mismatch.lua" --nproc 2 --debug --timeout 60
expect "shape mismatch: the run fails" [ "$status" -eq 1 ]
expect "shape mismatch: within 30 s" [ "$elapsed" -lt 30 ]
expect "shape mismatch: rank 0's shape is named" contains "$err" "rank 0 called all_gather of float32[2, 3] at $work/gather_mismatch.lua:3"
expect "shape mismatch: rank 1's shape is named" contains "$err" "rank 1 called all_gather of float32[3, 3] at $work/gather_mismatch.lua:3"
expect "shape mismatch: nothing was gathered" [ -z "$out" ]
expect "shape mismatch: no process left" no_survivors

cat >"$work/different_ops.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 0 then
  acc:reduce(accel.ones(4), "sum")
else
  acc:wait_for_everyone()
end
LUA
run_accel "$work/different_ops.lua" --nproc 2 --debug
expect "different collectives: the run fails" [ "$status" -eq 1 ]
expect "different collectives: within 30 s" [ "$elapsed" -lt 30 ]
expect "different collectives: both are named" \
  contains "$err" "ranks called different collectives: rank 0 called all_reduce of float32[4] (sum)"
expect "different collectives: rank 1's barrier is named" contains "$err" "rank 1 called barrier"

cat >"$work/matching.lua" <<'LUA'
local acc = accel.Accelerator{}
local parts = acc:gather(accel.full({ 2 }, acc.process_index))
acc:print("sum " .. parts:sum():item())
LUA
run_accel "$work/matching.lua" --nproc 3 --debug
expect "matching collectives pass under --debug" [ "$status" -eq 0 ]
expect "matching collectives give the right result" contains "$out" "sum 6"

cat >"$work/never_arrives.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then
  os.execute("sleep 60")   -- never reaches the barrier in time
end
acc:wait_for_everyone()
LUA
run_accel "$work/never_arrives.lua" --nproc 2 --timeout 5
expect "timeout: the run fails" [ "$status" -eq 1 ]
expect "timeout: after the timeout, not at the sleep's end" [ "$elapsed" -ge 5 -a "$elapsed" -lt 30 ]
expect "timeout: the operation and its line are named" \
  contains "$err" "never_arrives.lua:5: accel.dist.barrier: barrier #2 at $work/never_arrives.lua:5 did not complete within 5 s"
expect "timeout: the rank that did not arrive is named" \
  contains "$err" "rank 1 outside any collective since it left init #1"
expect "timeout: rank 1 is reported stopped, not as the cause" \
  contains "$err" "rank 1 was stopped by the launcher after rank 0 failed"
expect "timeout: no process left" no_survivors

finish
