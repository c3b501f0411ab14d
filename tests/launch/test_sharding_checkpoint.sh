# Checkpoints under sharding: a model trained at ZeRO stage 3 on 2 ranks
# saves its full state (FULL_STATE_DICT), resumes exactly on 2 ranks, and
# loads on 3 ranks at stage 3 and under plain data parallel. The same with
# each rank's own slices (SHARDED_STATE_DICT), at stages 2 and 3. Saved between
# two micro-steps of gradient accumulation at stages 2 and 3, a resumed run
# keeps the gradient accumulated before the save (each rank's slice).
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

for stage in 3 2; do
  sharded="$work/sharded_$stage"
  mkdir -p "$sharded"
  run_accel "$recipe" --nproc 2 -- save "$sharded" "$stage" SHARDED_STATE_DICT
  expect "stage $stage, SHARDED_STATE_DICT: saving on 2 ranks exits 0" [ "$status" -eq 0 ]
  expect "stage $stage: each rank wrote its own slices and no full model"     [ -f "$sharded/checkpoint/model_rank_1.safetensors" -a -f "$sharded/checkpoint/optimizer_rank_1.safetensors"       -a ! -f "$sharded/checkpoint/model.safetensors" ]
  run_accel "$recipe" --nproc 2 -- resume "$sharded" "$stage" SHARDED_STATE_DICT
  expect "stage $stage: the slices resume exactly on 2 ranks" contains "$out" "sharding checkpoint resume:"
  run_accel "$recipe" --nproc 3 -- load "$sharded" "$stage" SHARDED_STATE_DICT
  expect "stage $stage: the slices of 2 ranks load exactly on 3" contains "$out" "sharding checkpoint load:"
done
run_accel "$recipe" --nproc 3 -- load "$work/sharded_3" 0
expect "stage 3's slices load exactly under plain data parallel" contains "$out" "sharding checkpoint load:"

for stage in 2 3; do
  run_accel "$recipe" --nproc 2 -- save_mid "$work" "$stage"
  expect "stage $stage: saving between micro-steps exits 0" [ "$status" -eq 0 ]
  run_accel "$recipe" --nproc 2 -- resume_mid "$work" "$stage"
  expect "stage $stage: resuming between micro-steps finishes the update exactly" \
    contains "$out" "sharding checkpoint resume_mid:"
  if [ "$stage" = 2 ]; then
    run_accel "$recipe" --nproc 2 -- resume_mid "$work" 0
    expect "stage 2's accumulated slices refused by plain data parallel, naming the file" \
      contains "$err" "gradients_rank_0.safetensors' holds an accumulated gradient 'flat_1'"
  fi
done

finish
