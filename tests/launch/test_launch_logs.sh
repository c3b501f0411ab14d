# --log-dir DIR keeps each rank's whole output, stdout and stderr, in
# DIR/rank-N.log, as well as showing it on the terminal as usual; a failing
# rank's traceback is in its log too, and a restart appends to the logs.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/talk.lua" <<'LUA'
local acc = accel.Accelerator{}
local r = acc.process_index
print("stdout line of rank " .. r)
io.stderr:write("stderr line of rank " .. r .. "\n")
-- Every rank has written its lines before rank 2 fails and the launcher
-- stops the others.
acc:wait_for_everyone()
if r == 2 and os.getenv("ACCEL_RESTART_COUNT") == "0" then error("rank two gives up") end
acc:wait_for_everyone()
LUA
run_accel "$work/talk.lua" --nproc 3 --log-dir "$work/logs" --max-restarts 1
expect "the run exits 0 after its restart" [ "$status" -eq 0 ]
for r in 0 1 2; do
  log="$work/logs/rank-$r.log"
  expect "rank $r: its log exists" [ -f "$log" ]
  expect "rank $r: stdout is in its log" grep -qx "stdout line of rank $r" "$log"
  expect "rank $r: stderr is in its log" grep -qx "stderr line of rank $r" "$log"
  expect "rank $r: no other rank's lines" [ "$(grep -c "of rank [^$r]" "$log")" -eq 0 ]
  expect "rank $r: both starts are in its log" [ "$(grep -c "stdout line" "$log")" -eq 2 ]
done
expect "the failing rank's error and traceback are in its log" \
  grep -q "talk.lua:8: rank two gives up" "$work/logs/rank-2.log"
expect "the terminal still shows rank 0 as is" grep -qx "stdout line of rank 0" "$work/out"
expect "the terminal still shows other ranks prefixed" grep -qx "\[rank 1\] stdout line of rank 1" "$work/out"
expect "the terminal still shows stderr" grep -qx "\[rank 2\] stderr line of rank 2" "$work/err"

run_accel "$work/talk.lua" --nproc 1 --log-dir "$work/talk.lua/not-a-dir"
expect "a log directory that cannot be made fails before any rank runs" [ "$status" -eq 1 ]
expect "it names the directory" contains "$err" "cannot create the log directory $work/talk.lua/not-a-dir"

finish
