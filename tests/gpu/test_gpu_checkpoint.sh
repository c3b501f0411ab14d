# accel.checkpoint on the GPU: recomputation on the device's autograd
# thread, the CUDA generator and autocast restored, errors naming the
# block's line (checkpoint.lua).
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/checkpoint.lua"
expect "checkpoint.lua passes on the GPU" [ "$status" -eq 0 ]
expect "it ran every check" [ "$(grep -c '^ok: ' "$work/out")" -eq 7 ]
finish
