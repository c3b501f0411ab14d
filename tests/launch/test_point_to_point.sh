# Point-to-point send/recv with an absent peer (engine/comm/tensor_exchange.h):
# a receive whose sender never sends, and a send whose receiver never
# receives, end the run within the --timeout (not after the peer's sleep),
# naming the operation, the peer's group and global rank and the group, and
# leave no process; on shared memory (Gloo beneath), Gloo's TCP path and MPI.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

cat >"$work/absent_sender.lua" <<'LUA'
local acc = accel.Accelerator{}
local g = require("accel.core").dist.new_group("stages", { 0, 1 })
if acc.process_index == 1 then os.execute("sleep 60") end
g:recv(nil, 1)
LUA
cat >"$work/absent_receiver.lua" <<'LUA'
local acc = accel.Accelerator{}
local g = require("accel.core").dist.new_group("stages", { 0, 1 })
if acc.process_index == 1 then os.execute("sleep 60") end
-- Large enough that Gloo and MPI wait for the receiver rather than buffer it.
g:send(accel.zeros({ 16777216 }), 1)
LUA

#   absent DESCRIPTION RECIPE MESSAGE [LAUNCH OPTIONS...]
absent() {
  local what=$1 recipe=$2 message=$3
  shift 3
  run_accel "$recipe" --nproc 2 --threads 1 --timeout 3 "$@"
  expect "$what: the run fails" [ "$status" -ne 0 ]
  expect "$what: at the timeout, not after the peer's sleep" [ "$elapsed" -lt 40 ]
  expect "$what: the peer and the group are named" contains "$err" "$message"
  expect "$what: no process left" no_survivors
}

for memory in 1 0; do
  export ACCEL_SHARED_MEMORY=$memory
  absent "shared memory $memory: recv from an absent sender" "$work/absent_sender.lua" \
    "recv from rank 1 (global rank 1) of group 'stages' (global ranks 0, 1) (the tensor's description) failed"
  absent "shared memory $memory: send to an absent receiver" "$work/absent_receiver.lua" \
    "send to rank 1 (global rank 1) of group 'stages' (global ranks 0, 1)"
done
unset ACCEL_SHARED_MEMORY

if command -v mpirun >/dev/null; then
  if [ "$(id -u)" -eq 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  fi
  absent "mpi: recv from an absent sender" "$work/absent_sender.lua" \
    "recv from rank 1 (global rank 1) of group 'stages' (global ranks 0, 1) (the tensor's description) did not complete: mpi group recv (rank 0 of 2) did not complete within 3 s" \
    --backend mpi
  absent "mpi: send to an absent receiver" "$work/absent_receiver.lua" \
    "send to rank 1 (global rank 1) of group 'stages' (global ranks 0, 1) did not complete" --backend mpi
else
  echo "mpi cases skipped: no mpirun (openmpi-bin)"
fi

finish
