# Big-model loading onto the GPU: device_map = "auto" fills GPU 0 when no
# max_memory is given, and a map across GPU 0, the CPU and disk computes each
# part where its weights are, with outputs equal to the CPU model's
# (big_model.lua).
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/big_model.lua" -- "$work/weights"
expect "big_model.lua passes on the GPU" [ "$status" -eq 0 ]
expect "every check passed" grep -qE '^gpu big model: [0-9]+ passed, 0 failed$' "$work/out"
finish
