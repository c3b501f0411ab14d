# Nothing of a run outlives it: what a recipe starts in the background is
# killed when its rank ends, even after a normal exit; when the launcher
# itself is killed with SIGKILL, its guardian kills what the workers started
# and removes the run's shared memory; a rank killed between creating the
# shared memory segment and the other ranks opening it leaves no name in
# /dev/shm; a segment left when the whole tree was killed at once is removed
# by the next run, one of a launcher still running is not.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

# alive PID: a running process, not a zombie.
alive() {
  local state
  state=$(ps -o stat= -p "$1" 2>/dev/null)
  [ -n "$state" ] && [[ "$state" != Z* ]]
}
# The waits for a run to start allow 120 s: a loaded machine (the whole
# suite at -j 2) has taken over 30 s to start two workers; each loop ends as
# soon as the run is up.
# gone_within SECONDS PID...: every PID has ended within SECONDS.
gone_within() {
  local limit=$1; shift
  for _ in $(seq $((limit * 10))); do
    local any=0
    for pid in "$@"; do alive "$pid" && any=1; done
    [ "$any" -eq 0 ] && return 0
    sleep 0.1
  done
  return 1
}

cat >"$work/background.lua" <<'LUA'
local acc = accel.Accelerator{}
local dir, rank, mode = arg[1], acc.process_index, arg[2]
-- A background child in the worker's process group, which outlives the
-- shell that started it.
os.execute(string.format("sleep 300 >/dev/null 2>&1 & echo $! > %s/sleep.%d", dir, rank))
acc:print("started")
if mode == "hang" then
  io.open(dir .. "/ready." .. rank, "w"):close()
  os.execute("sleep 300")
end
LUA

# 1. A normal exit: the background sleeps die with their ranks.
rm -f "$work"/sleep.*
run_accel "$work/background.lua" --nproc 2 --threads 1 -- "$work" exit
expect "normal exit: the run succeeds" [ "$status" -eq 0 ]
expect "normal exit: the background children of both ranks are gone" \
  gone_within 5 "$(cat "$work/sleep.0")" "$(cat "$work/sleep.1")"

# 2. The launcher killed with SIGKILL: its workers die with it (PDEATHSIG),
#    and the guardian ends what they started.
rm -f "$work"/sleep.* "$work"/ready.*
"$accel_run" "$work/background.lua" --nproc 2 --threads 1 -- "$work" hang >"$work/out" 2>"$work/err" &
launcher=$!
for _ in $(seq 1200); do
  [ -f "$work/ready.0" ] && [ -f "$work/ready.1" ] && break
  sleep 0.1
done
expect "SIGKILL: both ranks started their children" [ -f "$work/sleep.0" ] && [ -f "$work/sleep.1" ]
workers=$(pgrep -P "$launcher" -d ' ')
# This run's guardian only: other runs on the machine have their own.
guardian=$(pgrep -P "$launcher" -f accel-run-guardian)
expect "SIGKILL: the launcher started its guardian" [ -n "$guardian" ]
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
# shellcheck disable=SC2086
expect "SIGKILL: the workers and their background children are gone" \
  gone_within 10 $workers "$(cat "$work/sleep.0")" "$(cat "$work/sleep.1")"
expect "SIGKILL: no guardian is left" gone_within 10 "$guardian"

# 3. Rank 0 killed right after it created the segment (the fault point sends
#    it SIGKILL before the other ranks open it): the name is removed.
cat >"$work/sum.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:print("sum", acc:reduce(accel.tensor({ 1 }), "sum"):item())
LUA
segments_before=$(ls /dev/shm | grep -c "^accel-" || true)
ACCEL_FAULT_INJECT=shared-memory-created run_accel "$work/sum.lua" --nproc 2 --threads 1
expect "segment window: rank 0 is killed" [ "$status" -ne 0 ]
expect "segment window: the run said which rank" contains "$err" "rank 0"
segments_after=$(ls /dev/shm | grep -c "^accel-" || true)
expect "segment window: no segment is left in /dev/shm" [ "$segments_after" -le "$segments_before" ]

# 4. The same window, the launcher killed too: the guardian removes the name.
cat >"$work/slow_join.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:print("joined")
os.execute("sleep 300")
LUA
# start_slow_run: starts it in the background; sets $launcher, and $prefix
# from a worker's environment.
start_slow_run() {
  "$accel_run" "$work/slow_join.lua" --nproc 2 --threads 1 >"$work/out" 2>"$work/err" &
  launcher=$!
  for _ in $(seq 1200); do
    contains "$(cat "$work/out")" "joined" && break
    sleep 0.1
  done
  local worker
  worker=$(pgrep -P "$launcher" | head -1)
  prefix=$(tr '\0' '\n' <"/proc/$worker/environ" | sed -n 's/^ACCEL_SHM_PREFIX=//p')
}
start_slow_run
# The ranks unlinked their segment once both had it; plant one under the
# run's prefix, as a rank killed in the window would have left it.
expect "guardian: the workers know the run's prefix" contains "$prefix" "accel-$launcher-"
: >"/dev/shm/${prefix}all-reduce-planted"
kill -KILL "$launcher"
wait "$launcher" 2>/dev/null
gone() { [ ! -e "$1" ]; }
for _ in $(seq 100); do gone "/dev/shm/${prefix}all-reduce-planted" && break; sleep 0.1; done
expect "guardian: the run's segment is removed after the launcher's SIGKILL" gone "/dev/shm/${prefix}all-reduce-planted"
rm -f "/dev/shm/${prefix}all-reduce-planted"

# 5. The whole tree killed at once, guardian first: nothing is left to
#    remove the segment, so the next run removes what a launcher that is
#    gone left, and says so.
start_slow_run
segment="/dev/shm/${prefix}all-reduce-planted"
head -c $((8 * 1024 * 1024)) /dev/zero >"$segment"
guardian=$(pgrep -P "$launcher" -f accel-run-guardian)
workers=$(pgrep -P "$launcher" -d ' ')
# shellcheck disable=SC2086
kill -KILL "$guardian" "$launcher" $workers
wait "$launcher" 2>/dev/null
# What the workers started (each worker leads its process group).
for group in $workers; do pkill -KILL -g "$group"; done
sleep 0.5
expect "tree SIGKILL: the 8 MiB segment is left behind" test -e "$segment"
run_accel "$work/sum.lua" --nproc 2 --threads 1
expect "tree SIGKILL: the next run succeeds" test "$status" -eq 0
expect "tree SIGKILL: and removes the segment of the launcher that is gone" test ! -e "$segment"
expect "tree SIGKILL: saying so" contains "$err" "accel-run: removed 1 shared memory segment(s), 8.0 MiB, left in /dev/shm by launcher(s) $launcher, which ended"
rm -f "$segment"
# A segment of a launcher that runs stays.
sleep 30 &
living=$!
live_segment="/dev/shm/accel-$living-$(readlink /proc/self/ns/pid | tr -dc 0-9)-0badcafe-all-reduce-planted"
: >"$live_segment"
run_accel "$work/sum.lua" --nproc 2 --threads 1
expect "a segment whose launcher still runs is kept" test -e "$live_segment"
kill "$living"
rm -f "$live_segment"
finish
