# Shared by the GPU tests: tests/launch/lib.sh, and the skip rule. Where this
# build has no CUDA or the machine shows no GPU, a test says so and exits
# 77, which CTest reports as skipped (never as passed).
source "$(dirname "$0")/../launch/lib.sh"
gpu_lines=$("$accel_run" env 2>&1 | grep -E '^(CUDA|GPU)')
if ! grep -q '^GPU [0-9]' <<<"$gpu_lines"; then
  echo "SKIPPED: no GPU here: ${gpu_lines:-accel-run env names no GPU}"
  exit 77
fi
