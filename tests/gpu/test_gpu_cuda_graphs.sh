# Whole training steps captured as CUDA graphs and replayed equal eager
# steps bit for bit (cuda_graphs.lua); what cannot be captured falls back
# to eager with one line saying why.
source "$(dirname "$0")/lib.sh"
run_accel "$source_root/tests/gpu/cuda_graphs.lua"
expect "cuda_graphs.lua passes on the GPU" [ "$status" -eq 0 ]
expect "it ran every check" [ "$(grep -c '^ok: ' "$work/out")" -ge 17 ]
echo "$out" | grep -E 'losses|fallback|cuda_graphs:'
finish
