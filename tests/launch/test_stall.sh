# Stall reports: while ranks wait in a collective past --stall-report
# seconds for a rank that has not arrived, the launcher says who waits in
# which operation at which recipe line, and where the missing rank is; the
# run itself goes on and succeeds. A run whose collectives keep moving is
# never reported, and --stall-report 0 turns the reports off.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
lacks() { [[ "$1" != *"$2"* ]]; }

cat >"$work/late.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:reduce(accel.ones(3), "sum")
if acc.process_index == 1 then
  os.execute("sleep 7")   -- rank 1 is late for the barrier
end
acc:wait_for_everyone()
acc:print("all arrived")
LUA
run_accel "$work/late.lua" --nproc 3 --stall-report 2
expect "a late rank: the run still succeeds" [ "$status" -eq 0 ]
expect "a late rank: the run finished" contains "$out" "all arrived"
# The seconds are left loose: on a loaded machine a report may come late.
expect "the report names the waiting ranks" contains "$err" "accel-run: stall: ranks 0, 2 have waited "
expect "the report names the operation, its line and the missing rank" \
  contains "$err" " s in barrier #3 at $work/late.lua:6 for rank 1, which has not arrived:"
expect "the report says where the missing rank is" \
  contains "$err" "rank 1 outside any collective since it left all_reduce #2 of float32[3] (sum) at $work/late.lua:2"
expect "the stall is reported again while it lasts" [ "$(grep -c '^accel-run: stall: ' <<<"$err")" -ge 2 ]

run_accel "$work/late.lua" --nproc 3 --stall-report 0
expect "--stall-report 0: the run succeeds" [ "$status" -eq 0 ]
expect "--stall-report 0: nothing on stderr but a warning of more ranks than cores" [ -z "$(grep -v "^accel-run: warning: " <<<"$err")" ]

cat >"$work/busy.lua" <<'LUA'
local acc = accel.Accelerator{}
local deadline = os.time() + 4
-- The ranks' clocks may turn a second apart: they agree on when time is up,
-- so that every rank runs the same number of collectives.
repeat
  local up = acc:reduce(accel.tensor({ os.time() >= deadline and 1 or 0 }), "sum")
until up:item() > 0
acc:print("done")
LUA
run_accel "$work/busy.lua" --nproc 2 --stall-report 2
expect "collectives that keep moving are no stall" [ "$status" -eq 0 ]
expect "collectives that keep moving: no report" [ -z "$err" ]

finish
