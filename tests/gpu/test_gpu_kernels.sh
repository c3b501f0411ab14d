# The kernels the multi-tensor optimizers, clipping and fused attention run
# on the GPU, read from acc:profile's CUDA trace, and their agreement with
# the single-tensor and explicit paths (kernels.lua).
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/kernels.lua"
expect "kernels.lua passes on the GPU" [ "$status" -eq 0 ]
expect "it ran every check" [ "$(grep -c '^ok: ' "$work/out")" -eq 9 ]
finish
