# Twenty launches of a 2-rank recipe all succeed, two at a time, so that
# runs started together must not race for a port or a file, and none leaves
# a process behind.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/step.lua" <<'LUA'
local acc = accel.Accelerator{}
local total = acc:reduce(accel.tensor({ acc.process_index + 1 }):float(), "sum")
acc:wait_for_everyone()
acc:print("total " .. total:item())
LUA

succeeded=0
for round in $(seq 10); do
  for k in 1 2; do
    timeout 60 "$accel_run" "$work/step.lua" --nproc 2 --threads 1 >"$work/out.$k" 2>"$work/err.$k" &
    pids[$k]=$!
  done
  for k in 1 2; do
    if wait "${pids[$k]}" && grep -qx "total 3" "$work/out.$k"; then
      succeeded=$((succeeded + 1))
    else
      echo "launch $round.$k failed:"; cat "$work/out.$k" "$work/err.$k"
    fi
  done
done
out=""; err=""
expect "20 of 20 launches succeed" [ "$succeeded" -eq 20 ]
expect "no process left" no_survivors

finish
