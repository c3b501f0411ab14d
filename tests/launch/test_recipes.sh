# The example recipes train to their promised accuracy on 2 ranks (parallel_lm, a mesh of 4; pipeline_lm, PP 2,
# and PP 2 x FSDP 2 on 4; moe_lm, EP 2).
source "$(dirname "$0")/lib.sh"

accuracy_at_least() {  # accuracy_at_least PATTERN MINIMUM: the number after PATTERN in stdout
  local value
  value=$(grep -o "$1 [0-9.]*" "$work/out" | tail -n 1 | awk '{print $NF}')
  [ -n "$value" ] && awk -v v="$value" -v m="$2" 'BEGIN { exit !(v >= m) }'
}

loss_falls() {  # loss_falls: the last "step N  loss L" line of stdout below the first by more than 0.5
  local losses
  losses=$(awk '/^step / { print $4 }' <<<"$out")
  awk -v first="$(head -n 1 <<<"$losses")" -v last="$(tail -n 1 <<<"$losses")" \
    'BEGIN { exit !(first > 0 && last < first - 0.5) }'
}

run_accel "$source_root/recipes/quickstart.lua" --nproc 2
expect "quickstart on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "quickstart on 2 ranks reaches 95% accuracy" accuracy_at_least "accuracy" 0.95

run_accel "$source_root/recipes/digits.lua" --nproc 2 -- \
  /usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz "$work/runs"
expect "digits on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "digits on 2 ranks reaches 95% test accuracy" accuracy_at_least "test accuracy" 0.95
expect "digits shows its epochs' progress" grep -q "^epochs: 100% 20/20 .*loss=" "$work/out"
expect "digits logs its loss and accuracy to metrics.jsonl" grep -q '"test_accuracy"' "$work/runs/digits/metrics.jsonl"

run_accel "$source_root/recipes/cnn.lua" --nproc 2
expect "cnn on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "cnn on 2 ranks reaches 95% test accuracy" accuracy_at_least "test accuracy" 0.95

# A small Llama under TP 2 x FSDP 2 on 4 ranks: the loss falls, and the
# checkpoint and the full model are written.
run_accel "$source_root/recipes/parallel_lm.lua" --nproc 4 --threads 1 -- steps=30 every=10 out="$work/parallel_lm"
expect "parallel_lm on 4 ranks exits 0" [ "$status" -eq 0 ]
expect "parallel_lm runs on the mesh tp 2 x dp_shard 2" contains "$out" "dp_shard 2 x tp 2"
expect "parallel_lm's loss falls" loss_falls
expect "parallel_lm saves a checkpoint and the full model" \
  [ -f "$work/parallel_lm/checkpoint/manifest.json" -a -f "$work/parallel_lm/model/model.safetensors" ]

# A small Llama through a pipeline of 2 stages (1F1B, 4 micro-batches) on 2
# ranks: the loss falls and the evaluation runs the forwards alone.
run_accel "$source_root/recipes/pipeline_lm.lua" --nproc 2 --threads 1 -- steps=40 every=10 out="$work/pipeline_lm"
expect "pipeline_lm on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "pipeline_lm runs on the mesh pp 2" contains "$out" "mesh pp 2 x dp 1, 1F1B over 4 micro-batches"
expect "pipeline_lm's loss falls" loss_falls
expect "pipeline_lm evaluates through the pipeline" grep -q "^evaluation loss [0-9.]" "$work/out"
expect "pipeline_lm saves each pp rank's stages and the full model" \
  [ -f "$work/pipeline_lm/checkpoint/model_rank_1.safetensors" -a -f "$work/pipeline_lm/model/model.safetensors" ]

# The same on 4 ranks: PP 2 x FSDP 2, each stage sharded over the pair
# holding it; the first rank of each pair writes its stages whole.
run_accel "$source_root/recipes/pipeline_lm.lua" --nproc 4 --threads 1 -- steps=40 every=10 out="$work/pipeline_fsdp"
expect "pipeline_lm on 4 ranks exits 0" [ "$status" -eq 0 ]
expect "pipeline_lm on 4 ranks runs PP 2 x FSDP 2" contains "$out" "mesh pp 2 x dp 2 (FSDP over dp_shard 2), 1F1B"
expect "pipeline_lm's loss falls under PP 2 x FSDP 2" loss_falls
expect "pipeline_lm under PP 2 x FSDP 2 saves each stage once and the full model" \
  [ -f "$work/pipeline_fsdp/checkpoint/model_rank_2.safetensors" \
    -a ! -f "$work/pipeline_fsdp/checkpoint/model_rank_1.safetensors" \
    -a -f "$work/pipeline_fsdp/model/model.safetensors" ]

# A Mixtral-architecture model with its experts split over 2 ranks (EP 2,
# the other weights FSDP over dp_shard 2): the loss falls, save_model
# writes every expert of every layer, as one process does, and save_state
# each ep rank's experts from their first holder.
run_accel "$source_root/recipes/moe_lm.lua" --nproc 2 --threads 1 -- steps=40 every=10 out="$work/moe_lm"
expect "moe_lm on 2 ranks exits 0" [ "$status" -eq 0 ]
expect "moe_lm splits the experts over ep 2" contains "$out" "mesh dp_shard 2, ep 2: each rank holds 2 of the 4 experts"
expect "moe_lm's loss falls" loss_falls
expect "moe_lm's full model holds all 4 experts of each layer" \
  /usr/bin/python3 -c 'import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    names = json.loads(f.read(n))
sys.exit(not all("model.layers.%d.block_sparse_moe.experts.%d.w2.weight" % (l, e) in names
                 for l in range(2) for e in range(4)))' "$work/moe_lm/model/model.safetensors"
expect "moe_lm's training state: each ep rank's experts, by their first holder" \
  [ -f "$work/moe_lm/state/model_experts_rank_0.safetensors" -a -f "$work/moe_lm/state/model_experts_rank_1.safetensors" \
    -a -f "$work/moe_lm/state/optimizer_experts_rank_1.safetensors" ]

finish
