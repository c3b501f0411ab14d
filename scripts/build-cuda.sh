#!/usr/bin/env bash
# The second build configuration: accel against LibTorch 2.x with CUDA and
# NCCL, into build-cuda/. Debian has no CUDA LibTorch, so it comes from the
# CUDA build of PyTorch on PyPI: the wheel is downloaded once into .cache/
# (ignored) and only its headers, libraries and CMake files are unpacked.
# The CPU build (scripts/build.sh) never needs any of this.
#
#   scripts/build-cuda.sh            download if needed, configure, build
#   TORCH_DIR=/path/to/torch scripts/build-cuda.sh
#       build against an installed PyTorch instead (the GPU machine's:
#       python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
#
# Exit codes: 0 built; 1 the build failed (a compile or link error);
# 3 LibTorch could not be downloaded (no network, no PyPI): nothing was built.
set -euo pipefail
cd "$(dirname "$0")/.."

# The version the lent GPU machines carry (PyTorch 2.11 with CUDA 13).
version=${ACCEL_CUDA_TORCH_VERSION:-2.11.0}
cache=.cache/libtorch-cuda-$version
build_dir=${ACCEL_CUDA_BUILD_DIR:-build-cuda}
link_flags=()

if [ -z "${TORCH_DIR:-}" ]; then
  if [ ! -f "$cache/torch/share/cmake/Torch/TorchConfig.cmake" ]; then
    mkdir -p .cache/wheels
    wheel=$(ls .cache/wheels/torch-"$version"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
      echo "build-cuda: downloading PyTorch $version (CUDA) from PyPI for its LibTorch" >&2
      if ! python3 -m pip download -q --no-deps --only-binary=:all: --dest .cache/wheels \
          "torch==$version" >&2; then
        echo "build-cuda: DOWNLOAD FAILED: PyTorch $version could not be fetched from PyPI;" \
             "the CUDA configuration was NOT built" >&2
        exit 3
      fi
      wheel=$(ls .cache/wheels/torch-"$version"-*.whl | head -n 1)
    fi
    rm -rf "$cache.partial" && mkdir -p "$cache.partial"
    # Headers, libraries and CMake files only; not the Python extension.
    python3 - "$wheel" "$cache.partial" <<'PY'
import sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
keep = ("torch/include/", "torch/lib/", "torch/share/cmake/")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(keep) and not name.endswith("libtorch_python.so"):
            z.extract(name, dest)
PY
    rm -rf "$cache" && mv "$cache.partial" "$cache"
    # The wheel's own copy of the wheel stays only until unpacked.
    rm -f "$wheel"
  fi
  TORCH_DIR=$PWD/$cache/torch
  # Here nothing runs the result: libraries that LibTorch's CUDA libraries
  # load at run time and that only the GPU machines carry (cuSPARSELt,
  # cuFile, NVSHMEM) are not looked for at link time. Every symbol accel
  # itself uses is still resolved against LibTorch.
  link_flags=(-DCMAKE_EXE_LINKER_FLAGS=-Wl,--unresolved-symbols=ignore-in-shared-libs)
fi

nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$TORCH_DIR/share/cmake;${ACCEL_EXTRA_PREFIX:-}" \
  ${nvcc:+-DCMAKE_CUDA_COMPILER=$nvcc} "${link_flags[@]}" >/dev/null
# ACCEL_BUILD_TARGETS: only these (the GPU machine builds accel-run alone).
targets=()
for target in ${ACCEL_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
cmake --build "$build_dir" -j "${ACCEL_BUILD_JOBS:-$(nproc)}" "${targets[@]}" ${ACCEL_BUILD_KEEP_GOING:+-- -k 0}
