# What goes wrong across nodes is said, and nothing hangs: a node that never
# comes is named when the rendezvous times out; nodes running different
# numbers of processes are refused; a rank failing on node 1 stops node 0's
# workers at once, and node 0's launcher says why. The store listens for
# other machines, so it takes only the run's secret: a run of several nodes
# without one is refused, a node with a wrong one is told so, and a stranger
# cannot stop a run by writing a forged failure into the store.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
export ACCEL_RDZV_TOKEN="multinode-test-$$"

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
printf 'local acc = accel.Accelerator{}\nacc:wait_for_everyone()\n' >"$work/meet.lua"

port=$(free_port)
run_accel "$work/meet.lua" --nproc 2 --nnodes 3 --master-port "$port" --rdzv-timeout 3
expect "a missing node: the launcher exits 1" [ "$status" -eq 1 ]
expect "a missing node: after the rendezvous timeout" [ "$elapsed" -lt 20 ]
expect "a missing node: the missing nodes are named" \
  contains "$err" "accel-run: rendezvous failed: the nodes did not all arrive within 3 s at the store on 127.0.0.1:$port: nodes 1, 2 did not (expected 3 nodes)"

port=$(free_port)
"$accel_run" "$work/meet.lua" --nproc 3 --nnodes 2 --node-rank 1 --master-port "$port" \
  --rdzv-timeout 20 >"$work/node1.out" 2>"$work/node1.err" &
second=$!
run_accel "$work/meet.lua" --nproc 2 --nnodes 2 --master-port "$port" --rdzv-timeout 20
wait "$second"; status1=$?
expect "unequal nodes: both launchers fail" [ "$status" -eq 1 -a "$status1" -eq 1 ]
expect "unequal nodes: the counts are named" \
  contains "$err" "every node must run the same number of processes (--nproc), but node 0 2, node 1 3"

cat >"$work/fail_on_node1.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 3 then error("rank three fails on node 1") end
os.execute("sleep 30")   -- node 0's ranks are busy; only their launcher can stop them in time
acc:wait_for_everyone()
LUA
port=$(free_port)
"$accel_run" "$work/fail_on_node1.lua" --nproc 2 --nnodes 2 --node-rank 1 --master-port "$port" \
  >"$work/node1.out" 2>"$work/node1.err" &
second=$!
run_accel "$work/fail_on_node1.lua" --nproc 2 --nnodes 2 --master-port "$port"
wait "$second"; status1=$?
err1=$(cat "$work/node1.err")
expect "a failure on node 1: node 1 exits 1" [ "$status1" -eq 1 ]
expect "a failure on node 1: node 1 names its culprit" contains "$err1" "rank 3 failed with exit code 1"
expect "a failure on node 1: node 1 shows the error" contains "$err1" "rank three fails on node 1"
expect "a failure on node 1: node 0 stops within seconds, not after the sleep" [ "$elapsed" -lt 20 ]
expect "a failure on node 1: node 0 fails too" [ "$status" -ne 0 ]
expect "a failure on node 1: node 0 says why" contains "$err" "accel-run: stopping: node 1 failed (rank 3 failed)"
expect "a failure on node 1: node 0's ranks were stopped" \
  contains "$err" "rank 0 was stopped by the launcher after node 1 failed (rank 3 failed)"

port=$(free_port)
ACCEL_RDZV_TOKEN= run_accel "$work/meet.lua" --nproc 1 --nnodes 2 --master-port "$port"
expect "no secret: refused before anything starts" [ "$status" -eq 2 ]
expect "no secret: the message says what to set" \
  contains "$err" "takes connections from other machines, so it needs a secret: set the same ACCEL_RDZV_TOKEN (or --rdzv-token SECRET) on every node"

port=$(free_port)
"$accel_run" "$work/meet.lua" --nproc 1 --nnodes 2 --node-rank 1 --master-port "$port" \
  --rdzv-token wrong-secret --rdzv-timeout 5 >"$work/node1.out" 2>"$work/node1.err" &
second=$!
run_accel "$work/meet.lua" --nproc 1 --nnodes 2 --master-port "$port" --rdzv-timeout 5
wait "$second"; status1=$?
err1=$(cat "$work/node1.err")
expect "a wrong secret: that node fails" [ "$status1" -ne 0 ]
expect "a wrong secret: it is told why" contains "$err1" "wrong rendezvous token"

# A SET frame (store_protocol.h) of node failure for round 0, from a peer
# that never presented the secret.
forge_failure() {
  exec 3<>"/dev/tcp/127.0.0.1/$1" || return
  printf '\x1c\x00\x00\x00\x01\x0d\x00\x00\x00rdzv/0/failed\x06\x00\x00\x00forged' >&3
  exec 3>&-
}
printf 'local acc = accel.Accelerator{}\nacc:wait_for_everyone()\nos.execute("sleep 4")\nacc:wait_for_everyone()\nprint("finished")\n' >"$work/slow.lua"
port=$(free_port)
"$accel_run" "$work/slow.lua" --nproc 1 --nnodes 2 --node-rank 1 --master-port "$port" \
  >"$work/node1.out" 2>"$work/node1.err" &
second=$!
(sleep 2; forge_failure "$port") &
forger=$!
run_accel "$work/slow.lua" --nproc 1 --nnodes 2 --master-port "$port"
wait "$second"; status1=$?
wait "$forger"
expect "a forged failure: node 0 finishes" [ "$status" -eq 0 ]
expect "a forged failure: node 1 finishes" [ "$status1" -eq 0 ]
expect "a forged failure: nobody mentions it" eval '! contains "$err$(cat "$work/node1.err")" forged'

expect "no process left" no_survivors

finish
