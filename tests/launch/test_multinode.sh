# Multi-node on one machine: two accel-run launchers, one per "node", each
# with 2 ranks, train recipes/quickstart.lua to the same result as 4 ranks
# under one launcher: the same accuracy and the same trained weights. The
# nodes are two network namespaces joined by a veth pair, each with its own
# address for the machine's host name (as on real machines, where Gloo finds
# its address through the host name); where namespaces cannot be made, that
# part is skipped with the reason, and two launchers on 127.0.0.1 still run.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
export ACCEL_RDZV_TOKEN="multinode-test-$$"  # the nodes' shared secret

weights_lua="$source_root/tests/launch/quickstart_weights.lua"
quickstart="$source_root/recipes/quickstart.lua"

# result FILE: the accuracy and weight lines of a run's output.
result() { grep -E '^(accuracy|weights) ' "$1"; }

# Over Gloo's TCP path like the nodes' all-reduces (on one node they would
# take shared memory, which sums in another order), so the weights agree to
# the last digit.
ACCEL_SHARED_MEMORY=0 run_accel "$weights_lua" --nproc 4 --threads 1 -- "$quickstart"
result "$work/out" >"$work/one_node"
expect "4 ranks on one node train" [ "$status" -eq 0 ]
expect "4 ranks on one node give an accuracy and weights" [ "$(grep -c '^weights' "$work/one_node")" -eq 4 ]

# two_nodes PREFIX0 PREFIX1 ADDR PORT: runs node 1 in the background and
# node 0 in front, the commands prefixed (to enter a namespace).
two_nodes() {
  local node0=$1 node1=$2 addr=$3 port=$4
  local common=(--nproc 2 --threads 1 --nnodes 2 --master-addr "$addr" --master-port "$port"
                --rdzv-timeout 30)
  $node1 timeout 60 "$accel_run" "$weights_lua" "${common[@]}" --node-rank 1 \
    -- "$quickstart" >"$work/node1.out" 2>"$work/node1.err" &
  local second=$!
  local start=$SECONDS
  $node0 timeout 60 "$accel_run" "$weights_lua" "${common[@]}" --node-rank 0 \
    -- "$quickstart" >"$work/out" 2>"$work/err"
  status=$?
  wait "$second"
  status1=$?
  elapsed=$((SECONDS - start))
  out=$(cat "$work/out"); err=$(cat "$work/err")$(cat "$work/node1.err")
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- two network namespaces joined by a veth pair
ns0="accel-$$-n0"; ns1="accel-$$-n1"
veth0="acv$$a"; veth1="acv$$b"
cleanup_namespaces() {
  ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null
  rm -rf "/etc/netns/$ns0" "/etc/netns/$ns1"
  rm -rf "$work"
}
trap cleanup_namespaces EXIT
why=""
if [ "$(id -u)" -ne 0 ]; then
  why="not root"
elif ! command -v ip >/dev/null; then
  why="no ip command (iproute2)"
elif ! { ip netns add "$ns0" && ip netns add "$ns1" &&
         ip link add "$veth0" type veth peer name "$veth1" &&
         ip link set "$veth0" netns "$ns0" && ip link set "$veth1" netns "$ns1" &&
         ip -n "$ns0" addr add 10.77.0.1/24 dev "$veth0" && ip -n "$ns1" addr add 10.77.0.2/24 dev "$veth1" &&
         ip -n "$ns0" link set "$veth0" up && ip -n "$ns1" link set "$veth1" up &&
         ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up; } 2>"$work/ip.err"; then
  why="cannot make network namespaces: $(head -1 "$work/ip.err")"
elif ! mkdir -p "/etc/netns/$ns0" "/etc/netns/$ns1" 2>/dev/null; then
  why="cannot write /etc/netns"
fi
if [ -n "$why" ]; then
  echo "skipped: two network namespaces ($why)"
else
  # `ip netns exec` mounts these over /etc/hosts: in each namespace the host
  # name resolves to that namespace's own address.
  printf '127.0.0.1 localhost\n10.77.0.1 %s\n' "$(hostname)" >"/etc/netns/$ns0/hosts"
  printf '127.0.0.1 localhost\n10.77.0.2 %s\n' "$(hostname)" >"/etc/netns/$ns1/hosts"
  two_nodes "ip netns exec $ns0" "ip netns exec $ns1" 10.77.0.1 29500
  result "$work/out" >"$work/namespaces"
  expect "namespaces: node 0 exits 0" [ "$status" -eq 0 ]
  expect "namespaces: node 1 exits 0" [ "$status1" -eq 0 ]
  expect "namespaces: the same accuracy and weights as 4 ranks on one node" \
    cmp -s "$work/one_node" "$work/namespaces"
  echo "two namespaces: ${elapsed}s"
fi

# --- two launchers on the loopback address
two_nodes "" "" 127.0.0.1 "$(free_port)"
result "$work/out" >"$work/loopback"
expect "loopback: node 0 exits 0" [ "$status" -eq 0 ]
expect "loopback: node 1 exits 0" [ "$status1" -eq 0 ]
expect "loopback: the same accuracy and weights as 4 ranks on one node" \
  cmp -s "$work/one_node" "$work/loopback"
echo "two launchers on loopback: ${elapsed}s"
expect "no process left" no_survivors

finish
