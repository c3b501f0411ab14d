#!/usr/bin/env bash
# Installs, builds, and runs every test (Catch2, Lua API, launch and fault tests).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
ctest --test-dir build --output-on-failure -j 2
