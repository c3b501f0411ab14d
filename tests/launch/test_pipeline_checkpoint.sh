# Checkpoints of a pipeline loaded on other meshes, each run a fresh launch
# (tests/launch/pipeline_checkpoint.lua): a small Llama trained through a
# pipeline at PP 2 (2 ranks) saves after 5 of 10 updates, each pp rank its
# stages under the whole model's names; a fresh run from other weights
# resumes it exactly on PP 2 (1e-7), and within 1e-5 of the uninterrupted
# run on one process, on another stage cut (Interleaved1F1B, 2 virtual
# stages a rank), at PP 4 (4 ranks) and under TP 2 (tensor_parallel, no
# pipeline). One process's checkpoint, and TP 2's (FULL_STATE_DICT), resume
# at PP 2 within 1e-5; PP 2 x DP 2 (4 ranks, the first replica's ranks write)
# resumes exactly on PP 2 x DP 2 and within 1e-5 on PP 2 and on one
# process; PP 2 x FSDP 2 (each stage sharded over its dp_shard pair, whose
# first rank writes it whole) alike, and also on sharded models without a
# pipeline: FSDP 2, FSDP 4 and TP 2 x FSDP 2 (tensor_parallel before
# prepare), each rank keeping its shards of the whole tensors read; PP 2's
# resumes under PP 2 x FSDP 2 within 1e-5. Every resumed run's full weights
# right after load_state (get_state_dict) are the saving run's at the save
# (save_model) within 1e-6. Every saving run's losses and final weights
# (save_model) are one process's within 1e-5, so each resumed run is held
# to one process's too.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/pipeline_checkpoint.lua"

save() {  # save NAME NPROC MESH (MESH: 0 for one process, or sizes such as pp=2,dp=2)
  mkdir -p "$work/$1"
  run_accel "$recipe" --nproc "$2" --threads 1 -- save "$work/$1" "$3"
  expect "$1: saving on $3 on $2 rank(s) exits 0" contains "$out" "pipeline checkpoint save: $3"
}
resume() {  # resume NAME NPROC MESH TOL
  run_accel "$recipe" --nproc "$2" --threads 1 -- resume "$work/$1" "$3" "$4"
  expect "$1: resumed on $3 on $2 rank(s) within $4" contains "$out" "pipeline checkpoint resume: $3,"
}

save pp2 2 pp=2
expect "pp2: each pp rank's stages and optimizer state, the layout, no full model" \
  [ -f "$work/pp2/checkpoint/model_rank_1.safetensors" -a -f "$work/pp2/checkpoint/optimizer_rank_1.safetensors" \
    -a -f "$work/pp2/checkpoint/mesh_layout.lua" -a ! -f "$work/pp2/checkpoint/model.safetensors" ]
resume pp2 2 pp=2 1e-7
resume pp2 1 0 1e-5
expect "loading on one process says so" contains "$out" "was saved on pp 2 x dp_replicate 1"
resume pp2 2 pp=2,v=2 1e-5
expect "loading on another stage cut says so" contains "$out" "(another stage cut)"
resume pp2 4 pp=4 1e-5
resume pp2 2 tp=2 1e-5

save tp2 2 tp=2
resume tp2 2 pp=2 1e-5

save one 1 0
resume one 2 pp=2 1e-5

# Saved on 4 ranks (PP 2 x DP 2 or PP 2 x FSDP 2), where the first
# data-parallel rank of each stage (ranks 0 and 2) writes it; resumed on 4,
# on PP 2 and on one process.
on_four_ranks() {  # on_four_ranks NAME MESH
  save "$1" 4 "$2"
  expect "$1: the first data-parallel rank of each stage (0 and 2) writes its stages" \
    [ -f "$work/$1/checkpoint/model_rank_2.safetensors" -a ! -f "$work/$1/checkpoint/model_rank_1.safetensors" ]
  resume "$1" 4 "$2" 1e-7
  resume "$1" 2 pp=2 1e-5
  resume "$1" 1 0 1e-5
}
on_four_ranks pp2_dp2 pp=2,dp=2
on_four_ranks pp2_fsdp2 pp=2,shard=2
# On sharded models without a pipeline: the whole model's names read from
# both stages' files, each rank keeping its flat shards (and tp slices).
resume pp2_fsdp2 2 shard=2 1e-5
resume pp2_fsdp2 4 shard=4 1e-5
resume pp2_fsdp2 4 tp=2,shard=2 1e-5
resume pp2 4 pp=2,shard=2 1e-5

finish
