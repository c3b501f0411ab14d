#!/bin/sh
# The engine's cost side by side with LibTorch C++ and Python PyTorch DDP:
# builds what it needs, runs the workloads of bench/README.md ("workloads")
# and prints markdown tables on stdout (progress goes to stderr).
#   bench/run.sh [--repeats N] [--only digits-mlp|cnn|char-lm] [--no-allreduce]
#                [--quiet-load 1.5] [--wait 1200] [--no-results]
#   bench/run.sh --allocators [--repeats N] [--only ...]
#   bench/run.sh --sharding [--ranks 2,4] [--repeats N] [--layers 12 --width 768 ...]
#   bench/run.sh --watch [--repeats N]
# The build folder is $ACCEL_BENCH_BUILD, else build-bench.
set -eu
cd "$(dirname "$0")/.."
build=${ACCEL_BENCH_BUILD:-build-bench}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >&2
# --sharding: memory and speed of each sharding stage next to PyTorch's
# ZeroRedundancyOptimizer (bench/sharding_memory/), which needs accel-run only.
if [ "${1:-}" = "--sharding" ]; then
  shift
  cmake --build "$build" -j2 --target accel-run >&2
  exec /usr/bin/python3 bench/sharding_memory/harness.py --build "$build" "$@"
fi
# --watch: from a save to the first finished step under accel-run --watch,
# against a cold accel-run and torchrun (bench/python/watch_latency.py).
if [ "${1:-}" = "--watch" ]; then
  shift
  cmake --build "$build" -j2 --target accel-run >&2
  exec /usr/bin/python3 bench/python/watch_latency.py --build "$build" "$@"
fi
cmake --build "$build" -j2 --target accel-run bench_launch bench_digits_mlp bench_cnn bench_char_lm \
  bench_allreduce >&2
# --allocators: the CPU allocator comparison (bench/python/allocators.py) instead.
script=harness.py
if [ "${1:-}" = "--allocators" ]; then
  script=allocators.py
  shift
fi
exec /usr/bin/python3 "bench/python/$script" --build "$build" "$@"
