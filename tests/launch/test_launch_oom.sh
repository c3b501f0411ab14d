# A rank killed by the kernel's out-of-memory killer is reported as such:
# the launcher runs in a memory cgroup of its own with a limit, rank 1
# allocates past it, and the report names the OOM kill (the cgroup's
# oom_kill count rose) rather than a bare SIGKILL. Skipped, saying why,
# where no memory cgroup can be made (not root, no cgroup file system).
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

# The directory of this process's memory cgroup, v1 or v2.
memory_cgroup() {
  local v1 v2
  v1=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3 }' /proc/self/cgroup)
  if [ -n "$v1" ] && [ -d "/sys/fs/cgroup/memory$v1" ]; then echo "/sys/fs/cgroup/memory$v1"; return; fi
  v2=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then echo "/sys/fs/cgroup$v2"; return; fi
  [ -d "/sys/fs/cgroup/unified$v2" ] && grep -qw memory /sys/fs/cgroup/unified/cgroup.controllers 2>/dev/null &&
    echo "/sys/fs/cgroup/unified$v2"
}

parent=$(memory_cgroup)
cg="$parent/accel-oom-test-$$"
if [ -z "$parent" ] || ! mkdir "$cg" 2>/dev/null; then
  echo "skipped: cannot make a memory cgroup under '${parent:-/sys/fs/cgroup}' (needs root and a writable cgroup file system)"
  finish
  exit
fi
cleanup_cgroup() { rmdir "$cg" 2>/dev/null; rm -rf "$work"; }
trap cleanup_cgroup EXIT
limit=$((900 * 1024 * 1024))
if [ -f "$cg/memory.limit_in_bytes" ]; then
  echo "$limit" >"$cg/memory.limit_in_bytes"
  echo "$limit" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null  # no escape into swap
else
  echo "$limit" >"$cg/memory.max"
  echo 0 >"$cg/memory.swap.max" 2>/dev/null
fi

cat >"$work/hungry.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then
  local hog = accel.ones(512 * 1024 * 1024)   -- 2 GiB of float32, written
  print(hog:sum():item())
end
acc:wait_for_everyone()
LUA
start=$SECONDS
sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec timeout 60 "$@"' sh "$cg" \
  "$accel_run" "$work/hungry.lua" --nproc 2 --threads 1 >"$work/out" 2>"$work/err"
status=$?
elapsed=$((SECONDS - start))
out=$(cat "$work/out"); err=$(cat "$work/err")
expect "the run fails with 128+9" [ "$status" -eq 137 ]
expect "rank 1 is named as killed by the out-of-memory killer" \
  contains "$err" "rank 1 was killed by the out-of-memory killer (signal 9, SIGKILL)"
expect "rank 0 is reported stopped" contains "$err" "rank 0 was stopped by the launcher after rank 1 failed"
expect "within 60 s" [ "$elapsed" -lt 60 ]
expect "no process left" no_survivors

finish
