#!/usr/bin/env bash
# Builds and checks accel on a lent GPU machine (the `device` tool). Its
# image has PyTorch with CUDA, CMake and a compiler, but none of the Debian
# packages accel builds with, and no network: they travel as .deb files in
# .gpu-deps/ (ignored by git; name it in the tool's `carry`).
#
#   here:   scripts/gpu-machine.sh fetch    Debian packages and the recipes'
#                                           data files into .gpu-deps/
#           scripts/gpu-machine.sh pack     after scripts/build-cuda.sh here:
#                                           what running build-cuda/ needs
#                                           (accel-run, its libraries, the
#                                           CTest files, OpenMPI's libraries)
#                                           into .gpu-deps/, so the GPU
#                                           machine spends no minutes building
#   there:  scripts/gpu-machine.sh build    unpack them, build build-cuda/
#                                           against the machine's PyTorch
#           scripts/gpu-machine.sh test     build, then the GPU tests (ctest -L gpu)
#           scripts/gpu-machine.sh run CMD...  CMD with what running
#                                           build-cuda/ needs
#           scripts/gpu-machine.sh session OUT [PART...]
#                                           one lent-GPU call's checks, logs
#                                           and results under OUT: build,
#                                           then PARTs (default: tests
#                                           profile bench)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
deps=$PWD/.gpu-deps
prefix=/tmp/accel-gpu-deps
# libreadline-dev and what it links with: `accel-run repl`; PCRE2, ICU and
# SentencePiece: the tokenizers (engine/tokenizers).
packages=(libluajit-5.1-dev libluajit-5.1-2 libyaml-cpp-dev libyaml-cpp0.7 nlohmann-json3-dev catch2 libgloo-dev zlib1g-dev
          libreadline-dev libreadline8 libncurses-dev libtinfo6 libncurses6 libncursesw6
          libpcre2-dev libpcre2-8-0 libicu-dev libicu72 libsentencepiece-dev libsentencepiece0)

fetch() {
  mkdir -p "$deps"
  (cd "$deps" && apt-get download "${packages[@]}")
  # The recipes read Debian's digits set and GPL-3 text from these paths.
  cp /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz /usr/share/common-licenses/GPL-3 "$deps/"
}

# The build made here runs there: the LibTorch it links is the wheel of the
# machine's own PyTorch (the same version and CUDA, scripts/build-cuda.sh),
# and the machine's C library is no older than Debian's. Its CTest files
# name this checkout's path, which `session` links to the checkout there.
pack() {
  [ -x build-cuda/accel-run ] || { echo "pack: build build-cuda/ first (scripts/build-cuda.sh)" >&2; return 1; }
  rm -rf "$deps/build-cuda" "$deps/mpi"
  mkdir -p "$deps/build-cuda/tests" "$deps/mpi"
  cp build-cuda/accel-run build-cuda/*.so build-cuda/CTestTestfile.cmake "$deps/build-cuda/"
  cp build-cuda/tests/CTestTestfile.cmake "$deps/build-cuda/tests/"
  echo "$PWD" >"$deps/build-cuda/SOURCE_ROOT"
  # OpenMPI and what it loads, less the C and C++ runtimes the machine has.
  local mpi
  mpi=$(ldd build-cuda/libaccel_worker.so | awk '$1 ~ /^libmpi\.so/ { print $3 }')
  if [ -n "$mpi" ]; then
    cp -L "$mpi" "$deps/mpi/"
    ldd "$mpi" | awk '$3 ~ /^\// && $1 !~ /^lib(c|m|dl|rt|pthread|util|z|stdc\+\+|gcc_s)\.so/ { print $3 }' \
      | xargs -r cp -L -t "$deps/mpi/"
  fi
  du -sh "$deps"
}

# Puts a packed build in place: build-cuda/ here, and this checkout at the
# path its CTest files name. Returns 1 where nothing was packed.
unpack_build() {
  [ -f "$deps/build-cuda/SOURCE_ROOT" ] || return 1
  local root
  root=$(cat "$deps/build-cuda/SOURCE_ROOT")
  if [ "$root" != "$PWD" ] && [ ! -e "$root" ]; then
    mkdir -p "$(dirname "$root")"
    ln -s "$PWD" "$root"
  fi
  rm -rf build-cuda
  cp -r "$deps/build-cuda" build-cuda
}

environment() {
  if [ ! -d "$prefix" ]; then
    for deb in "$deps"/*.deb; do dpkg -x "$deb" "$prefix"; done
    # Their pkg-config files name /usr; where the machine has pkg-config it
    # must find the unpacked copies.
    sed -i "s|^prefix=/usr\$|prefix=$prefix/usr|" "$prefix"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$prefix"/usr/share/pkgconfig/*.pc 2>/dev/null || true
    # zlib1g-dev's libz.so points at a file of Debian's zlib1g; use the machine's.
    ln -sf "$(ldconfig -p | awk '/libz\.so\.1 .*x86-64/ { print $NF; exit }')" "$prefix/usr/lib/x86_64-linux-gnu/libz.so"
    mkdir -p /usr/lib/python3/dist-packages/sklearn/datasets/data /usr/share/common-licenses
    cp "$deps/digits.csv.gz" /usr/lib/python3/dist-packages/sklearn/datasets/data/
    [ -f /usr/share/common-licenses/GPL-3 ] || cp "$deps/GPL-3" /usr/share/common-licenses/
  fi
  TORCH_DIR=$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  local nccl
  nccl=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])' 2>/dev/null || true)
  export TORCH_DIR
  export ACCEL_EXTRA_PREFIX=$prefix/usr
  export CXXFLAGS="-isystem $prefix/usr/include${nccl:+ -isystem $nccl/include}"
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu:$prefix/lib/x86_64-linux-gnu:$TORCH_DIR/lib:$deps/mpi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export ACCEL_BUILD_JOBS=${ACCEL_BUILD_JOBS:-$(nproc)}
  # The tests and benchmarks there need accel-run (and its worker library) only.
  export ACCEL_BUILD_TARGETS=${ACCEL_BUILD_TARGETS:-accel-run}
}

# tests: ctest -L gpu. profile: char-lm and char-lm-large traced for accel
# and PyTorch, summarised side by side (bench/gpu/trace_summary.py). bench:
# bench/gpu/harness.py's table, with its extra rows.
session() {
  local out=$1
  shift
  local parts=("$@")
  [ ${#parts[@]} -gt 0 ] || parts=(tests profile bench)
  mkdir -p "$out"
  environment
  local start=$SECONDS
  if unpack_build; then
    echo "session: the build packed on $(cat build-cuda/SOURCE_ROOT)'s machine"
  else
    scripts/build-cuda.sh >"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; return 1; }
    echo "session: built in $((SECONDS - start)) s"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  local status=0
  for part in "${parts[@]}"; do
    start=$SECONDS
    case "$part" in
      tests)
        ctest --test-dir build-cuda -L gpu --output-on-failure -j 6 >"$out/ctest.log" 2>&1 || status=1
        grep -E "tests passed|Test +#|ok: .*loss|losses|fallback|SKIPPED" "$out/ctest.log" | grep -v "ok: " | tail -40
        grep -E "^(bf16|fp8) loss|losses:|fallback line|largest relative" "$out/ctest.log" || true
        ;;
      profile)
        local traces=/tmp/accel-traces
        mkdir -p "$traces"
        for size in small large; do
          local loop=(12 5 1)
          [ "$size" = large ] && loop=(4 5 1)
          ACCEL_BENCH_CHARLM=$size ACCEL_BENCH_DEVICE=cuda ACCEL_BENCH_PROFILE=$traces/accel-$size.json \
            build-cuda/accel-run bench/workloads/char_lm.lua --threads 1 -- "${loop[@]}" >/dev/null
          ACCEL_BENCH_CHARLM=$size ACCEL_BENCH_DEVICE=cuda ACCEL_BENCH_PROFILE=$traces/torch-$size.json \
            OMP_NUM_THREADS=1 python3 bench/python/char_lm.py "${loop[@]}" >/dev/null
          python3 bench/gpu/trace_summary.py "accel=$traces/accel-$size.json" "PyTorch=$traces/torch-$size.json" \
            | tee "$out/profile-$size.md"
        done
        ;;
      bench)
        python3 bench/gpu/harness.py --build build-cuda --output "$out/RESULTS-gpu.md" 2>"$out/harness.log" \
          | tail -30 || status=1
        ;;
      *) echo "session: unknown part $part" >&2; return 2 ;;
    esac
    echo "session: $part took $((SECONDS - start)) s"
  done
  return $status
}

case "${1:-}" in
  fetch) fetch ;;
  pack) pack ;;
  run)
    shift
    unpack_build || true
    environment
    "$@"
    ;;
  build)
    environment
    scripts/build-cuda.sh
    ;;
  session)
    shift
    session "$@"
    ;;
  test)
    environment
    scripts/build-cuda.sh
    ctest --test-dir build-cuda -L gpu --output-on-failure -j 4
    ;;
  *)
    echo "usage: scripts/gpu-machine.sh fetch|pack|build|test|session OUT [PART...]|run CMD..." >&2
    exit 2
    ;;
esac
