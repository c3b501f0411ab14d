# All-reduces through shared memory under accel-run: taken when every rank
# is on this machine; when /dev/shm cannot hold the segment the ranks say
# why and fall back to Gloo's TCP path with the same results; a rank killed
# while its peer waits in one ends the run quickly, naming the culprit.
source "$(dirname "$0")/lib.sh"

cat >"$work/sum.lua" <<'LUA'
local acc = accel.Accelerator{}
local counts = require("accel.core").dist.counts
local t = acc:reduce(accel.full({ 1000 }, acc.process_index + 1))
acc:print(string.format("sum %g, through shared memory %d", t[1]:item(), counts().all_reduce_shared_memory))
LUA
run_accel "$work/sum.lua" --nproc 2
expect "one machine: the sum" contains "$out" "sum 3,"
expect "one machine: through shared memory" contains "$out" "through shared memory 1"
expect "one machine: nothing on stderr" [ -z "$err" ]

# A 1 MiB /dev/shm, in a mount namespace of its own, cannot hold the segment.
if unshare -m true 2>/dev/null; then
  start=$SECONDS
  unshare -m bash -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm && exec timeout 60 "$0" "$@"' \
    "$accel_run" "$work/sum.lua" --nproc 2 >"$work/out" 2>"$work/err"
  status=$? out=$(cat "$work/out") err=$(cat "$work/err") elapsed=$((SECONDS - start))
  expect "full /dev/shm: the run succeeds" [ "$status" -eq 0 ]
  expect "full /dev/shm: the same sum over TCP" contains "$out" "sum 3, through shared memory 0"
  expect "full /dev/shm: rank 0 says why" \
    contains "$err" "accel: rank 0: cannot reserve shared memory segment /accel-"
  expect "full /dev/shm: ... and what it does instead" \
    contains "$err" "No space left on device; all-reduces take Gloo's TCP path"
else
  echo "skipped: a small /dev/shm (unshare -m is not permitted here)"
fi

cat >"$work/die_in_all_reduce.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:reduce(accel.ones(4))
if acc.process_index == 1 then
  local stat = io.open("/proc/self/stat"):read("*l")
  os.execute("kill -9 " .. stat:match("^(%d+)"))
end
acc:reduce(accel.ones(4))  -- rank 0 waits here for a rank that is gone
LUA
run_accel "$work/die_in_all_reduce.lua" --nproc 2
expect "SIGKILL while the peer waits: launcher exits 128+9" [ "$status" -eq 137 ]
expect "SIGKILL while the peer waits: within 30 s" [ "$elapsed" -lt 30 ]
expect "SIGKILL while the peer waits: the signal is named" contains "$err" "rank 1 was killed by signal 9 (SIGKILL"
expect "SIGKILL while the peer waits: no process left" no_survivors
expect "no segment is left in /dev/shm" [ -z "$(find /dev/shm -maxdepth 1 -name 'accel-all-reduce-*' -newer "$work/sum.lua")" ]

finish
