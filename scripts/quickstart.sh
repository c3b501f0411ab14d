#!/usr/bin/env bash
# Installs, builds, and trains the quickstart recipe on 2 ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build/accel-run recipes/quickstart.lua --nproc 2
