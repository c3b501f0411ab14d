# Checkpoints under a device mesh loaded on another mesh, each run a fresh
# launch: a small Llama trained under tensor parallelism on 2 ranks (tp 2)
# saves after 5 of 10 updates, with FULL_STATE_DICT (the full state, written
# once) and SHARDED_STATE_DICT (each rank's slices and the mesh layout); a
# fresh run resumes it exactly on tp 2 (1e-7), and on one process (no mesh,
# and a mesh of tp 1) within 1e-5 of the uninterrupted run. The reverse too:
# checkpoints of one process (without a mesh, and with tp 1 and its slices)
# resume under tp 2 within 1e-5. FSDP on the mesh (4 ranks): TP 2 x FSDP 2
# and HSDP 2 x 2 checkpoints (FULL: gathered over dp_shard then tp;
# SHARDED: each rank's flat shards of its tp slices) resume on their own mesh
# (1e-7) and on others (one process, tp 2, TP 2 x FSDP 2 from HSDP) within
# 1e-5. FSDP 2 x CP 2 checkpoints (the shards span dp_shard x cp) resume on
# one process and on TP 2 x FSDP 2 (FULL and SHARDED) and on FSDP 4
# (SHARDED) within 1e-5, and TP 2 x FSDP 2's SHARDED one on FSDP 2 x CP 2. Every saving run's losses and final weights are one
# process's within 1e-5, so each resumed run is held to one process's too.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/mesh_checkpoint.lua"

save() {  # save NAME NPROC MESH TYPE (MESH: 0 for none, a tp size, or sizes such as tp=2,dp_shard=2)
  mkdir -p "$work/$1"
  run_accel "$recipe" --nproc "$2" --threads 1 -- save "$work/$1" "$3" "$4"
  expect "$1: saving on mesh $3 ($4) on $2 rank(s) exits 0" [ "$status" -eq 0 ]
}
resume() {  # resume NAME NPROC MESH TOL
  run_accel "$recipe" --nproc "$2" --threads 1 -- resume "$work/$1" "$3" "$4"
  expect "$1: resumed on mesh $3 on $2 rank(s) within $4" contains "$out" "mesh checkpoint resume: $3,"
}

save tp2_full 2 2 FULL_STATE_DICT
expect "tp2_full: one full model file" [ -f "$work/tp2_full/checkpoint/model.safetensors" ]
save tp2_sharded 2 2 SHARDED_STATE_DICT
expect "tp2_sharded: each rank's slices and the layout, no full model" \
  [ -f "$work/tp2_sharded/checkpoint/model_rank_1.safetensors" -a -f "$work/tp2_sharded/checkpoint/mesh_layout.lua" \
    -a ! -f "$work/tp2_sharded/checkpoint/model.safetensors" ]
for kind in full sharded; do
  resume "tp2_$kind" 2 2 1e-7
  resume "tp2_$kind" 1 0 1e-5
  resume "tp2_$kind" 1 1 1e-5
done
expect "loading on another mesh says so" contains "$out" "was saved on dp_replicate 1 x dp_shard 1 x cp 1 x tp 2"

save one_full 1 0 FULL_STATE_DICT
save one_tp1_sharded 1 1 SHARDED_STATE_DICT
resume one_full 2 2 1e-5
resume one_tp1_sharded 2 2 1e-5

save fsdp_full 4 tp=2,dp_shard=2 FULL_STATE_DICT
expect "fsdp_full: one full model file" [ -f "$work/fsdp_full/checkpoint/model.safetensors" ]
save fsdp_sharded 4 tp=2,dp_shard=2 SHARDED_STATE_DICT
expect "fsdp_sharded: each rank's flat shards, the flat layout and the mesh layout, no full model" \
  [ -f "$work/fsdp_sharded/checkpoint/model_rank_3.safetensors" -a -f "$work/fsdp_sharded/checkpoint/model_sharding.lua" \
    -a -f "$work/fsdp_sharded/checkpoint/mesh_layout.lua" -a ! -f "$work/fsdp_sharded/checkpoint/model.safetensors" ]
for kind in full sharded; do
  resume "fsdp_$kind" 4 tp=2,dp_shard=2 1e-7
  resume "fsdp_$kind" 1 0 1e-5
  resume "fsdp_$kind" 2 2 1e-5
done
expect "loading TP 2 x FSDP 2 elsewhere says so" contains "$out" "was saved on dp_replicate 1 x dp_shard 2 x cp 1 x tp 2"
for kind in full sharded; do
  save "hsdp_$kind" 4 dp_replicate=2,dp_shard=2 "$(tr a-z A-Z <<<"$kind")_STATE_DICT"
  resume "hsdp_$kind" 4 dp_replicate=2,dp_shard=2 1e-7
done
resume hsdp_full 1 0 1e-5
resume hsdp_sharded 4 tp=2,dp_shard=2 1e-5

# FSDP 2 x CP 2: the flat parameters cut over the four ranks of dp_shard x cp.
save cp_fsdp_full 4 dp_shard=2,cp=2 FULL_STATE_DICT
save cp_fsdp_sharded 4 dp_shard=2,cp=2 SHARDED_STATE_DICT
expect "cp_fsdp_sharded: each of the four ranks' flat shards and the flat layout, no full model" \
  [ -f "$work/cp_fsdp_sharded/checkpoint/model_rank_3.safetensors" \
    -a -f "$work/cp_fsdp_sharded/checkpoint/model_sharding.lua" -a ! -f "$work/cp_fsdp_sharded/checkpoint/model.safetensors" ]
resume cp_fsdp_full 1 0 1e-5
resume cp_fsdp_full 4 tp=2,dp_shard=2 1e-5
resume cp_fsdp_sharded 4 dp_shard=4 1e-5
resume cp_fsdp_sharded 4 tp=2,dp_shard=2 1e-5
resume cp_fsdp_sharded 1 0 1e-5
expect "loading FSDP 2 x CP 2 elsewhere says so" contains "$out" "was saved on dp_replicate 1 x dp_shard 2 x cp 2 x tp 1"
# And into context parallelism: TP 2 x FSDP 2's shards onto FSDP 2 x CP 2.
resume fsdp_sharded 4 dp_shard=2,cp=2 1e-5

finish
