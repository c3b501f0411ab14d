# A crowd of idle connections that never present the token, held by another
# process and reopened as fast as the store drops them, cannot keep a run
# from finishing or two nodes from meeting: the store closes the oldest
# stranger for each newcomer (StoreLimits), and each rank's final wait runs
# on a connection it made when it joined.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
export ACCEL_RDZV_TOKEN="strangers-test-$$"
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
crowd=""
stop_crowd() { [ -n "$crowd" ] && kill "$crowd" 2>/dev/null; wait "$crowd" 2>/dev/null; crowd=""; }
trap 'stop_crowd; rm -rf "$work"' EXIT

# Each rank waits 2 s after joining, so that the crowd holds every place
# the store had before the ranks finish (and, on two nodes, before the
# second node's ranks arrive).
cat >"$work/steps.lua" <<'LUA'
local acc = accel.Accelerator{}
acc:wait_for_everyone()
os.execute("sleep 2")
local total = 0
for step = 1, 20 do
  total = total + acc:reduce(accel.tensor({ acc.process_index + step }), "sum"):item()
end
acc:print("total " .. total)
LUA

port=$(free_port)
python3 "$source_root/tests/launch/idle_connections.py" "$port" 300 &
crowd=$!
sleep 0.5
run_accel "$work/steps.lua" --nproc 2 --threads 1 --master-port "$port"
expect "a run finishes with 300 idle connections held against its store" [ "$status" -eq 0 ]
expect "and computes what it should" contains "$out" "total 440"
stop_crowd

port=$(free_port)
python3 "$source_root/tests/launch/idle_connections.py" "$port" 300 &
crowd=$!
sleep 0.5
common=(--nproc 2 --threads 1 --nnodes 2 --master-addr 127.0.0.1 --master-port "$port" --rdzv-timeout 30)
run_accel "$work/steps.lua" "${common[@]}" --node-rank 0 &
first=$!
sleep 2  # the first node's store is up and crowded when the second arrives
timeout 60 "$accel_run" "$work/steps.lua" "${common[@]}" --node-rank 1 >"$work/node1.out" 2>"$work/node1.err" &
second=$!
wait "$first"
status=$?
out=$(cat "$work/out")
wait "$second"
status1=$?
stop_crowd
# A failure shows both nodes' output.
err="$err
--- node 1 (exit $status1): stdout
$(cat "$work/node1.out")
--- node 1: stderr
$(cat "$work/node1.err")"
expect "two nodes meet and finish under the same crowd" [ "$status" -eq 0 -a "$status1" -eq 0 ]
expect "and compute what 4 ranks should" contains "$out" "total 960"
finish
