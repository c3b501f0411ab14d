# mixed_precision = "fp8" (float8.lua): float8 linears within float8's
# rounding of float32, training as well as bf16; refused where the GPU has
# no float8 units, with the reason.
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/float8.lua"
expect "float8.lua passes on the GPU" [ "$status" -eq 0 ]
if grep -q '^SKIPPED: ' "$work/out"; then
  grep '^SKIPPED: ' "$work/out"
  finish
  exit 77
fi
expect "it ran every check" [ "$(grep -c '^ok: ' "$work/out")" -eq 10 ]
grep 'loss' "$work/out"
finish
