#!/usr/bin/env bash
# Runs the whole test suite against the CUDA configuration (build-cuda/, from
# scripts/build-cuda.sh) on a machine without a GPU: every CPU test then runs
# on LibTorch 2.x, and the GPU tests report themselves skipped. LibTorch's
# CUDA libraries load a few libraries at start that only GPU machines carry
# (cuSPARSELt, cuFile, NVSHMEM): they are downloaded once from PyPI into
# .cache/ (ignored). The CUDA toolkit provides the rest.
#   scripts/test-cuda-build.sh [ctest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
version=${ACCEL_CUDA_TORCH_VERSION:-2.11.0}
torch_lib=$PWD/.cache/libtorch-cuda-$version/torch/lib
runtime=$PWD/.cache/cuda-runtime-libs
[ -d "$torch_lib" ] && [ -x build-cuda/accel-run ] || { echo "test-cuda-build: run scripts/build-cuda.sh first" >&2; exit 2; }
if [ ! -d "$runtime" ]; then
  mkdir -p .cache/wheels "$runtime.partial"
  # The versions PyTorch $version's wheel requires.
  python3 -m pip download -q --no-deps --only-binary=:all: --dest .cache/wheels \
    nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 nvidia-cufile
  for wheel in .cache/wheels/nvidia_{cusparselt,nvshmem,cufile}*.whl; do
    python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if "/lib/" in n and ".so" in n: open(sys.argv[2] + "/" + n.rsplit("/", 1)[1], "wb").write(z.read(n))' \
      "$wheel" "$runtime.partial"
    rm -f "$wheel"
  done
  mv "$runtime.partial" "$runtime"
fi
cuda_lib=$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/../lib64
export LD_LIBRARY_PATH=$runtime:$cuda_lib:$torch_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ctest --test-dir build-cuda --output-on-failure -j 2 "$@"
