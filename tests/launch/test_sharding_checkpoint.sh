# Checkpoints under sharding: a model trained at ZeRO stage 3 on 2 ranks
# saves its full state (FULL_STATE_DICT), resumes exactly on 2 ranks, and
# loads on 3 ranks at stage 3 and under plain data parallel.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/sharding_checkpoint.lua"

run_accel "$recipe" --nproc 2 -- save "$work"
expect "saving at stage 3 on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "the checkpoint holds the full model" [ -f "$work/checkpoint/model.safetensors" ]

run_accel "$recipe" --nproc 2 -- resume "$work"
expect "resuming on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "resuming gives the uninterrupted run's weights and optimizer state exactly" \
  contains "$out" "sharding checkpoint resume:"

run_accel "$recipe" --nproc 3 -- load "$work" 3
expect "loading at stage 3 on 3 ranks exits 0" [ "$status" -eq 0 ]
expect "loading on 3 ranks restores the saved state exactly" contains "$out" "sharding checkpoint load:"

run_accel "$recipe" --nproc 3 -- load "$work" 0
expect "plain data parallel on 3 ranks loads it too" [ "$status" -eq 0 ]

finish
