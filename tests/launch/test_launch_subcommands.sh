# accel-run's subcommands: `test` checks every collective on the configured
# ranks with a pass line per check (gloo, --debug, and the mpi backend), and
# fails when a collective is broken; `env` reports versions, backends,
# cores, the BLAS behind libblas.so.3 and the config in force.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

checks=("all_reduce sum" "all_reduce mean" "all_reduce max" "broadcast from the first and the last rank"
        "all_gather in rank order" "barrier" "gradient reduction")

run_accel test --nproc 3 --threads 1
expect "test on 3 ranks: exits 0" [ "$status" -eq 0 ]
for check in "${checks[@]}"; do
  expect "test on 3 ranks: $check passes" grep -qx "  pass  $check" "$work/out"
done
expect "test on 3 ranks: the verdict line" contains "$out" "accel-run test: passed on 3 ranks (backend gloo)"
expect "test says where the ranks compute and what they reduce over" \
  contains "$out" "ranks compute on cpu and reduce over gloo"

printf 'num_processes: 2\ndebug: true\n' >"$work/two.yaml"
run_accel test --config "$work/two.yaml" --threads 1
expect "test takes its ranks from the config, in debug mode" \
  contains "$out" "accel-run test: passed on 2 ranks (backend gloo, debug)"
expect "test in debug mode: every check passes" [ "$(grep -c '^  pass  ' "$work/out")" -eq ${#checks[@]} ]

if command -v mpirun >/dev/null; then
  run_accel test --backend mpi --nproc 2 --threads 1
  expect "test on the mpi backend passes" contains "$out" "accel-run test: passed on 2 ranks (backend mpi)"
else
  echo "skipped: test on the mpi backend (no mpirun)"
fi

# A broken collective fails its check: all_reduce here returns its input unchanged.
mkdir -p "$work/lua/accel"
cp -r "$source_root/lua/." "$work/lua/"
cat >"$work/break_max.lua" <<'LUA'
local core = require("accel.core")
local real = core.dist.all_reduce
core.dist.all_reduce = function(t, op) if op == "max" then return t end return real(t, op) end
LUA
sed -i '1r '"$work/break_max.lua" "$work/lua/accel/commands/selftest.lua"
ACCEL_LUA_PATH="$work/lua" run_accel test --nproc 2 --threads 1
expect "a broken collective: test fails" [ "$status" -ne 0 ]
expect "a broken collective: its check says FAIL with what a rank saw" \
  contains "$out" "  FAIL  all_reduce max (rank 0 saw 0"
expect "a broken collective: the others still pass" grep -qx "  pass  all_reduce sum" "$work/out"
expect "a broken collective: the verdict line" contains "$out" "accel-run test: FAILED on 2 ranks"

run_accel env --nproc 2
expect "env exits 0" [ "$status" -eq 0 ]
# Debian's LibTorch calls libblas.so.3; the CUDA build's (PyTorch's wheel)
# carries its own BLAS, and env says that it loads none.
blas="BLAS: libblas.so.3 -> /"
contains "$out" "CUDA: not compiled in" || blas="BLAS: libblas.so.3 is not loaded"
for field in "accel: " "LibTorch: " "LuaJIT: LuaJIT 2." "MPI: " "CUDA: " "NCCL: " "backends compiled in: gloo" \
             "$blas" "CPU: " "ranks here: 2, threads per rank: " "config file: none" \
             "  num_processes: 2  # --nproc x --nnodes" "  backend: gloo  # default"; do
  expect "env shows '$field'" contains "$out" "$field"
done
printf 'max_restarts: 4\n' >"$work/restarts.yaml"
ACCEL_CONFIG_FILE="$work/restarts.yaml" run_accel env
expect "env shows the config file in force" contains "$out" "config file: $work/restarts.yaml"
expect "env shows where each value came from" contains "$out" "max_restarts: 4  # $work/restarts.yaml:1"
printf 'max_restart: 4\n' >"$work/typo.yaml"
run_accel env --config "$work/typo.yaml"
expect "env refuses a bad config like a run does" [ "$status" -eq 2 ]
expect "env names the bad key" contains "$err" "unknown key 'max_restart' (did you mean 'max_restarts'?)"

finish
