# A checkpoint saved on 2 ranks loads on 3: model and optimizer come back
# exactly, the interrupted epoch continues re-sharded over 3 ranks without
# skipping or repeating a sample, and the main process says so.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/checkpoint_world_size.lua"

run_accel "$recipe" --nproc 2 -- save "$work"
expect "saving on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "the checkpoint holds one RNG file per rank" \
  [ -f "$work/checkpoint/rng_0.safetensors" -a -f "$work/checkpoint/rng_1.safetensors" ]
expect "the checkpoint holds one loader position per rank" \
  [ -f "$work/checkpoint/dataloader_rank_0.lua" -a -f "$work/checkpoint/dataloader_rank_1.lua" ]
expect "the manifest records world size 2" grep -q '"world_size": 2' "$work/checkpoint/manifest.json"

run_accel "$recipe" --nproc 3 -- load "$work"
expect "loading on 3 ranks exits 0 with every check passed" contains "$out" "checkpoint world size: "
expect "loading on 3 ranks: no failure" [ "$status" -eq 0 ]
expect "the Accelerator says the checkpoint came from 2 processes" \
  contains "$out" "was saved on 2 process(es) and is loaded on 3"
expect "the loader says its epoch is re-sharded" contains "$out" "re-sharded"
expect "the message is printed once" [ "$(grep -c "is loaded on 3" "$work/out")" -eq 1 ]

finish
