# What the live-run tests share (test_live_control.sh, test_live_warm.sh):
# sending a chunk to the run started from the current folder, reading the
# step it was applied at, and waiting for a run's ready file.

# Sends a chunk, retrying while the run is still starting; sets $reply.
ctl() {
  local tries=0
  while :; do
    reply=$(timeout 60 "$accel_run" ctl "$@" 2>&1)
    ctl_status=$?
    [[ $reply == *"no live run was started"* || $reply == *"cannot connect"* ]] || return 0
    tries=$((tries + 1)); [ $tries -lt 100 ] || return 1
    sleep 0.1
  done
}
step_of() { sed -n 's/^applied at step \([0-9]*\)$/\1/p' <<<"$1"; }
# wait_for FILE PID: until FILE exists, while PID lives (60 s at most).
wait_for() {
  for _ in $(seq 1200); do
    [ -e "$1" ] && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}
