#!/usr/bin/env bash
# Installs the Debian packages accel builds and runs with. Nothing else is
# downloaded. Safe to run again: it does nothing when all are present.
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libtorch-dev libgloo-dev          # LibTorch 1.13 CPU with c10d and Gloo
  libluajit-5.1-dev                 # the embedded Lua
  libopenmpi-dev openmpi-bin        # the MPI backend
  libyaml-cpp-dev                   # config files
  nlohmann-json3-dev                # checkpoint manifests, safetensors headers, weight indexes
  libpcre2-dev libicu-dev           # tokenizers: pre-tokenizer regular expressions, Unicode data
  libsentencepiece-dev              # tokenizers: a tokenizer.model alone
  zlib1g-dev                        # reading .gz data files
  gnuplot-nox                       # accel-run plot draws its charts with it (PNG via pngcairo, SVG)
  libreadline-dev                   # accel-run repl's line editing and history
  tmux                              # the REPL's test drives it through a real terminal
  catch2                            # C++ tests
  libopenblas0-openmp               # fast BLAS for LibTorch (the reference one is ~18x slower)
  libdnnl-dev                       # oneDNN's sgemm for CPU linears (LibTorch links its library)
  python3-sklearn                   # ships the digits data set recipes/digits.lua reads
  python3-torch                     # the interop test and bench/ compare with Python PyTorch
  libjemalloc2 libtcmalloc-minimal4 # bench/run.sh --allocators compares the CPU allocator with them
  gzip procps                       # .gz files in the data tests; pgrep in the launch tests
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# LibTorch calls whatever libblas.so.3 is selected: make it OpenBLAS (OpenMP).
openblas=/usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3
if [ -e "$openblas" ] && [ "$(readlink -f /etc/alternatives/libblas.so.3-x86_64-linux-gnu)" != "$openblas" ]; then
  ${sudo:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu "$openblas"
fi
