# The MPI backend: `mpirun -np 2 accel-run RECIPE` and `accel-run --backend
# mpi --nproc 2 RECIPE` (which starts mpirun itself) train
# recipes/quickstart.lua to the same accuracy and weights as Gloo; under
# --backend mpi a failing rank is reported as under Gloo, with its Lua
# error, and a collective that never completes ends the run at the timeout.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

if ! command -v mpirun >/dev/null; then
  echo "skipped: no mpirun (openmpi-bin)"
  finish
  exit
fi
weights_lua="$source_root/tests/launch/quickstart_weights.lua"
quickstart="$source_root/recipes/quickstart.lua"
result() { grep -E '^(accuracy|weights) ' "$1"; }

run_accel "$weights_lua" --nproc 2 --threads 1 -- "$quickstart"
result "$work/out" >"$work/gloo"
expect "gloo: trains" [ "$status" -eq 0 ]
expect "gloo: ran on gloo" contains "$out" "backend gloo"

# As root, OpenMPI wants explicit consent.
if [ "$(id -u)" -eq 0 ]; then root_consent=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1); fi
start=$SECONDS
"${root_consent[@]}" timeout 60 mpirun -np 2 --oversubscribe "$accel_run" "$weights_lua" \
  --threads 1 -- "$quickstart" >"$work/out" 2>"$work/err"
status=$?; elapsed=$((SECONDS - start)); out=$(cat "$work/out"); err=$(cat "$work/err")
result "$work/out" >"$work/mpirun"
expect "mpirun: trains" [ "$status" -eq 0 ]
expect "mpirun: ran on mpi" contains "$out" "backend mpi"
expect "mpirun: the same accuracy and weights as gloo" cmp -s "$work/gloo" "$work/mpirun"

run_accel "$weights_lua" --backend mpi --nproc 2 --threads 1 -- "$quickstart"
result "$work/out" >"$work/backend_mpi"
expect "--backend mpi: trains" [ "$status" -eq 0 ]
expect "--backend mpi: ran on mpi" contains "$out" "backend mpi"
expect "--backend mpi: the same accuracy and weights as gloo" cmp -s "$work/gloo" "$work/backend_mpi"

cat >"$work/error_on_rank1.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then error("rank one cannot go on") end
acc:wait_for_everyone()
LUA
run_accel "$work/error_on_rank1.lua" --backend mpi --nproc 2
expect "--backend mpi, a failing rank: exit code 1" [ "$status" -eq 1 ]
expect "--backend mpi, a failing rank: it is named" contains "$err" "accel-run: rank 1 failed with exit code 1"
expect "--backend mpi, a failing rank: with its Lua error" \
  contains "$err" "error_on_rank1.lua:2: rank one cannot go on"

# A rank that sleeps past the 3 s timeout: the run fails at the timeout,
# not after the sleep, with MESSAGE in its errors, and leaves no process.
#   times_out DESCRIPTION RECIPE MESSAGE
times_out() {
  run_accel "$2" --backend mpi --nproc 2 --timeout 3
  expect "--backend mpi, $1: the run fails" [ "$status" -ne 0 ]
  expect "--backend mpi, $1: at the timeout, not after the sleep" [ "$elapsed" -lt 40 ]
  expect "--backend mpi, $1: the operation is named" contains "$err" "$3"
  expect "no process left" no_survivors
}

cat >"$work/never_arrives.lua" <<'LUA'
local acc = accel.Accelerator{}
if acc.process_index == 1 then os.execute("sleep 60") end
acc:wait_for_everyone()
LUA
times_out "a missing rank" "$work/never_arrives.lua" \
  "barrier #2 at $work/never_arrives.lua:3 did not complete within 3 s (--timeout): 1 rank did not arrive"

# A mesh group over MPI has no stall monitor: its own deadline ends a
# collective a member never reaches, naming the operation and the group.
cat >"$work/group_never_arrives.lua" <<'LUA'
local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
if acc.mesh.tp.rank == 1 then os.execute("sleep 60") end
acc.mesh.tp:all_reduce(accel.ones(2))
LUA
times_out "a group member that never arrives" "$work/group_never_arrives.lua" \
  "mpi group all_reduce (rank 0 of 2) did not complete within 3 s: a member of the group did not take part (--timeout)"

finish
