# bf16 and fp16 train on the GPU (mixed_precision.lua): the loss falls at
# least tenfold; fp16 from a scale of 2^40 skips its overflowing steps and
# still learns.
source "$(dirname "$0")/lib.sh"

loss_falls() {  # loss_falls PRECISION: final loss below a tenth of the first
  awk -v p="$1" '$1 == p && $2 == "loss" { ok = ($5 < $3 / 10) } END { exit !ok }' "$work/out"
}

run_accel "$source_root/tests/gpu/mixed_precision.lua" -- bf16
expect "bf16 runs on the GPU" contains "$out" "device cuda:0"
expect "bf16 learns" loss_falls bf16
run_accel "$source_root/tests/gpu/mixed_precision.lua" -- fp16
expect "fp16 learns" loss_falls fp16
run_accel "$source_root/tests/gpu/mixed_precision.lua" -- fp16 1099511627776
expect "fp16 from scale 2^40 skips overflowing steps" grep -Eq 'skipped [1-9]' "$work/out"
expect "and still learns" loss_falls fp16
run_accel "$source_root/tests/gpu/mixed_precision.lua" -- no
expect "float32 learns" loss_falls no
finish
