# A launcher whose stdout is a pipe nobody reads goes on supervising: rank 1
# writes far more than the pipe holds and then fails, and the launcher
# reports the failure, stops rank 0, says how much output it dropped and
# ends, where waiting in its write it would never have noticed.
source "$(dirname "$0")/lib.sh"
cat >"$work/chatty.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then
  local line = string.rep("z", 300)
  for _ = 1, 2000 do print(line) end
  io.stdout:flush()
  error("rank one gives up")
end
acc:wait_for_everyone()
LUA
mkfifo "$work/unread"
exec 3<>"$work/unread"  # a reader that never reads
start=$SECONDS
timeout 60 "$accel_run" "$work/chatty.lua" --nproc 2 >"$work/unread" 2>"$work/err"
status=$?
elapsed=$((SECONDS - start))
exec 3>&-
out=""
err=$(cat "$work/err")
expect "the launcher ends although nobody reads its stdout (exit $status after $elapsed s)" \
  test "$status" -ne 124 -a "$status" -ne 0
expect "it reports rank 1's failure" contains "$err" "rank one gives up"
expect "and stops rank 0" contains "$err" "rank 0 was stopped by the launcher after rank 1 failed"
expect "and says it dropped output" contains "$err" "bytes of the workers' output were dropped: nothing read the launcher's output"
expect "no process outlives it" no_survivors
finish
