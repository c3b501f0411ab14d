# One rank on the GPU: placement, copies, accel.cuda, device errors,
# autocast dtypes and the fp16 scaler's CUDA kernel (tensors.lua).
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/tensors.lua"
expect "tensors.lua passes on the GPU" [ "$status" -eq 0 ]
expect "it ran every check" [ "$(grep -c '^ok: ' "$work/out")" -ge 20 ]
finish
