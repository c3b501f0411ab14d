# 100 reruns under accel-run --watch leave the warm workers' memory, open
# descriptors and threads flat: each run's Lua state, tensors, loaders, files and
# threads are gone when the next one starts. ACCEL_WATCH_RERUNS changes the
# count.
source "$(dirname "$0")/lib.sh"
lacks() { [[ "$1" != *"$2"* ]]; }
export XDG_CONFIG_HOME="$work/xdg"
reruns=${ACCEL_WATCH_RERUNS:-100}
proj="$work/proj"
mkdir -p "$proj"
cd "$proj" || exit 1
sed "s/lr = LR/lr = 0.05/" "$source_root/tests/launch/watch_recipe.lua" >"$proj/train.lua"
echo "return { epochs = 2 }" >"$proj/helpers.lua"

# wait_runs N: waits (20 s at most) until the launcher has finished N runs.
wait_runs() {
  for _ in $(seq 1000); do
    [ "$(grep -c '^accel-run: run [0-9]* finished' "$work/err")" -ge "$1" ] && return 0
    sleep 0.02
  done
  return 1
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
fds() { ls "/proc/$1/fd" | wc -l; }
threads() { awk '/^Threads:/ { print $2 }' "/proc/$1/status"; }
# One line per rank: pid, resident KiB, open descriptors, threads.
measure() {
  for rank in 0 1; do
    local pid
    pid=$(cat "$work/warm/pid.$rank")
    echo "$pid $(rss_kb "$pid") $(fds "$pid") $(threads "$pid")"
  done
}

"$accel_run" train.lua --watch --nproc 2 -- "$work/warm" >"$work/out" 2>"$work/err" &
launcher=$!
wait_runs 1
# Memory settles over the first runs (LibTorch's kernels and caches, the
# allocator's arenas); from run 10 on it must stay flat.
for run in $(seq 2 "$reruns"); do
  echo "return { epochs = 2 }" >"$proj/helpers.lua"
  wait_runs "$run" || break
  [ "$run" -eq 10 ] && early=$(measure)
done
late=$(measure)
out=$(cat "$work/out"); err=$(cat "$work/err")
expect "all $reruns runs finish" test "$(grep -c '^accel-run: run [0-9]* finished' "$work/err")" -ge "$reruns"
echo "after run 10: $(echo $early)"
echo "after run $reruns: $(echo $late)"
measured() { [ "$(echo $early | wc -w)" -eq 8 ] && [ "$(echo $late | wc -w)" -eq 8 ]; }
expect "both workers were measured after run 10 and run $reruns" measured
expect "the same worker processes ran them all" test "$(echo "$early" | cut -d' ' -f1)" = "$(echo "$late" | cut -d' ' -f1)"
expect "and no worker was replaced" lacks "$err" "starting new workers"
growth_ok() {  # every rank's resident memory was measured twice and grew by less than 4 MiB
  paste <(echo "$early") <(echo "$late") |
    awk 'NF != 8 { bad = 1 } { if ($6 - $2 >= 4096) bad = 1 } END { exit bad + 0 }'
}
expect "resident memory stays flat from run 10 to run $reruns" growth_ok
expect "open descriptors stay the same" test "$(echo "$early" | cut -d' ' -f3)" = "$(echo "$late" | cut -d' ' -f3)"
expect "and so do threads" test "$(echo "$early" | cut -d' ' -f4)" = "$(echo "$late" | cut -d' ' -f4)"
kill -TERM "$launcher"
wait "$launcher"
expect "no process outlives the watch" no_survivors
finish
