# SIGINT and SIGTERM sent to the launcher reach every worker (and what the
# workers started), the launcher reports the interruption and exits 128 +
# the signal, and no process is left behind.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
lacks() { [[ "$1" != *"$2"* ]]; }

cat >"$work/wait.lua" <<'LUA'
local acc = accel.Accelerator{}
local dir, rank = arg[1], acc.process_index
-- A child of the worker, in its process group, whose pid the test checks.
os.execute(string.format("sleep 60 & echo $! > %s/sleep.%d; touch %s/started.%d; wait", dir, rank, dir, rank))
LUA

# The workers' sleeps are gone too (dead, or zombies left for init to reap).
sleeps_gone() {
  for f in "$work"/sleep.*; do
    local state
    state=$(ps -o stat= -p "$(cat "$f")" 2>/dev/null)
    if [ -n "$state" ] && [[ "$state" != Z* ]]; then return 1; fi
  done
}

# interrupt SIGNAL: starts a 3-rank run, waits until every rank runs, sends
# SIGNAL to the launcher alone, and records how the launcher ended.
interrupt() {
  rm -f "$work"/started.* "$work"/sleep.*
  local start=$SECONDS
  # Job control, so the launcher does not start with SIGINT ignored, as a
  # script's background commands otherwise do.
  set -m
  "$accel_run" "$work/wait.lua" --nproc 3 --grace-period 5 -- "$work" >"$work/out" 2>"$work/err" &
  local launcher=$!
  set +m
  for _ in $(seq 300); do
    [ "$(ls "$work"/started.* 2>/dev/null | wc -l)" -eq 3 ] && break
    sleep 0.1
  done
  sleep 0.5
  kill -"$1" "$launcher"
  wait "$launcher"
  status=$?
  elapsed=$((SECONDS - start))
  out=$(cat "$work/out")
  err=$(cat "$work/err")
}

interrupt TERM
expect "SIGTERM: the launcher exits 128+15" [ "$status" -eq 143 ]
expect "SIGTERM: within the grace period" [ "$elapsed" -lt 30 ]
expect "SIGTERM: it says it was interrupted" contains "$err" "accel-run: interrupted by SIGTERM"
for rank in 0 1 2; do
  expect "SIGTERM: rank $rank was stopped" contains "$err" "rank $rank was stopped by the launcher on SIGTERM"
done
expect "SIGTERM: no worker needed SIGKILL" lacks "$err" "needed SIGKILL"
expect "SIGTERM: no process left" no_survivors
expect "SIGTERM: what the workers started got it too" sleeps_gone

interrupt INT
expect "SIGINT: the launcher exits 128+2" [ "$status" -eq 130 ]
expect "SIGINT: within the grace period" [ "$elapsed" -lt 30 ]
expect "SIGINT: it says it was interrupted" contains "$err" "accel-run: interrupted by SIGINT"
for rank in 0 1 2; do
  expect "SIGINT: rank $rank was stopped" contains "$err" "rank $rank was stopped by the launcher on SIGINT"
done
expect "SIGINT: no process left" no_survivors
expect "SIGINT: what the workers started got it too" sleeps_gone

finish
