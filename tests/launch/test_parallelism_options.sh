# The device mesh from the launch, named as Accelerate names it: the options
# --parallelism-config-*-size and the config file's parallelism_config keys
# reach accel.Accelerator{} as its ParallelismConfig (a recipe's own sizes
# win); sizes that do not multiply to the processes are refused before any
# rank starts, naming them; `accel-run env` shows the mesh's groups, the
# flattened dp, dp_cp and dp_shard_cp among them.
source "$(dirname "$0")/lib.sh"
recipe="$source_root/tests/launch/parallelism_options.lua"

run_accel "$recipe" --parallelism-config-tp-size 2 --nproc 2 --threads 1 -- 2
expect "--parallelism-config-tp-size 2 --nproc 2 runs" [ "$status" -eq 0 ]
expect "the Accelerator's mesh has tp 2 over ranks 0 and 1" contains "$out" "mesh from the launch: tp 2 of ranks 0,1, dp 1"

cat >"$work/mesh.yaml" <<'YAML'
num_processes: 2
parallelism_config:
  parallelism_config_dp_replicate_size: 2
YAML
run_accel "$recipe" --config "$work/mesh.yaml" --threads 1 -- 1
expect "the config file's parallelism_config keys make the mesh" contains "$out" "mesh from the launch: tp 1 of ranks 0, dp 2"
run_accel "$recipe" --config "$work/mesh.yaml" --threads 1 --parallelism-config-tp-size 2 \
  --parallelism-config-dp-replicate-size 1 -- 2
expect "the command line wins over the file, key by key" contains "$out" "mesh from the launch: tp 2 of ranks 0,1, dp 1"

run_accel "$recipe" --parallelism-config-tp-size 4 --nproc 2 -- 4
expect "sizes that do not multiply to the processes: exit 2" [ "$status" -eq 2 ]
expect "the refusal names the sizes and the processes" contains "$err" \
  "the mesh's sizes multiply to 4 (--parallelism-config-tp-size 4) but the run has 2 process(es) (--nproc 2 x --nnodes 1)"
expect "no rank started" [ -z "$out" ]
run_accel "$recipe" --parallelism_config_tp_size 2 --nproc 2 -- 2
expect "Accelerate's underscores are refused with the dashed name" \
  contains "$err" "did you mean '--parallelism-config-tp-size'?"

run_accel env --nproc 4 --parallelism-config-tp-size 2 --parallelism-config-dp-replicate-size 2
expect "accel-run env exits 0" [ "$status" -eq 0 ]
expect "env shows the parallelism_config section in force" contains "$out" "parallelism_config:
    parallelism_config_dp_replicate_size: 2  # command line
    parallelism_config_tp_size: 2  # command line"
expect "env shows the mesh's sizes" contains "$out" "mesh over 4 rank(s): dp_replicate 2 x dp_shard 1 x cp 1 x tp 2"
expect "env shows the tp groups" contains "$out" "tp groups: {0, 1} {2, 3}"
expect "env shows the dp groups" contains "$out" "dp groups: {0, 2} {1, 3}"
expect "without cp, dp_cp is dp" contains "$out" "dp_cp groups: {0, 2} {1, 3}"
expect "without cp, dp_shard_cp is dp_shard" contains "$out" "dp_shard_cp groups: {0} {1} {2} {3}"
# With cp, the flattened groups differ from dp: rank = (replica x 2 + shard) x 2 + cp rank.
run_accel env --nproc 8 --parallelism-config-dp-replicate-size 2 --parallelism-config-dp-shard-size 2 \
  --parallelism-config-cp-size 2
expect "env with cp exits 0" [ "$status" -eq 0 ]
expect "env shows the sizes with cp" contains "$out" "mesh over 8 rank(s): dp_replicate 2 x dp_shard 2 x cp 2 x tp 1"
expect "env shows the cp groups" contains "$out" "cp groups: {0, 1} {2, 3} {4, 5} {6, 7}"
expect "env shows dp, the loaders' groups" contains "$out" "dp groups: {0, 2, 4, 6} {1, 3, 5, 7}"
expect "env shows dp_cp, over which gradients are averaged" contains "$out" "dp_cp groups: {0, 1, 2, 3, 4, 5, 6, 7}"
expect "env shows dp_shard_cp, FSDP's shard groups" contains "$out" "dp_shard_cp groups: {0, 1, 2, 3} {4, 5, 6, 7}"
# The pipeline's and ep's options: pp outermost, ep borrowing dp_shard x cp.
# rank = (pp x 2 + dp_shard) x 2 + tp.
run_accel env --nproc 8 --parallelism-config-pp-size 2 --parallelism-config-dp-shard-size 2 \
  --parallelism-config-tp-size 2 --parallelism-config-ep-size 2 --parallelism-config-pp-schedule Interleaved1F1B \
  --parallelism-config-pp-microbatches 4 --parallelism-config-pp-virtual-stages 2
expect "env with pp exits 0" [ "$status" -eq 0 ]
expect "env shows pp outermost and ep" contains "$out" \
  "mesh over 8 rank(s): pp 2 x dp_replicate 1 x dp_shard 2 x cp 1 x tp 2 (ep 2 of dp_shard x cp)"
expect "env shows the pipeline's schedule" contains "$out" "pipeline: Interleaved1F1B, 4 micro-batches, 2 stage(s) per rank"
expect "env shows the pp groups" contains "$out" "pp groups: {0, 4} {1, 5} {2, 6} {3, 7}"
expect "env shows the ep groups" contains "$out" "ep groups: {0, 2} {1, 3} {4, 6} {5, 7}"
expect "env shows the pipeline's keys in force" contains "$out" "parallelism_config_pp_schedule: Interleaved1F1B  # command line"
pipeline_recipe="$source_root/tests/launch/pipeline_options.lua"
cat >"$work/pipeline.yaml" <<'YAML'
num_processes: 2
parallelism_config:
  parallelism_config_pp_size: 2
  parallelism_config_pp_schedule: GPipe
  parallelism_config_pp_microbatches: 3
YAML
run_accel "$pipeline_recipe" --config "$work/pipeline.yaml" --threads 1
expect "the file's pipeline keys reach ParallelismConfig" contains "$out" \
  'config from the launch: ParallelismConfig{dp_replicate_size = 1, dp_shard_size = 1, cp_size = 1, tp_size = 1, pp_size = 2, pp_schedule = "GPipe", pp_microbatches = 3, pp_virtual_stages = 1}'
run_accel "$pipeline_recipe" --nproc 2 --parallelism-config-pp-size 2 --parallelism-config-pp-microbatches 1
expect "1F1B with fewer micro-batches than stages fails" [ "$status" -ne 0 ]
expect "the refusal names the sizes" contains "$err" "pp_microbatches = 1 < pp_size = 2"
run_accel "$pipeline_recipe" --nproc 2 --parallelism-config-pp-size 2 --parallelism-config-tp-size 2
expect "pp counts in the product: exit 2" [ "$status" -eq 2 ]
expect "the refusal names pp among the sizes" contains "$err" \
  "the mesh's sizes multiply to 4 (--parallelism-config-pp-size 2, --parallelism-config-tp-size 2) but the run has 2"
run_accel "$pipeline_recipe" --nproc 4 --parallelism-config-dp-shard-size 2 --parallelism-config-tp-size 2 \
  --parallelism-config-ep-size 4
expect "an ep that does not divide dp_shard x cp: exit 2" [ "$status" -eq 2 ]
expect "the refusal names ep and dp_shard x cp" contains "$err" \
  "--parallelism-config-ep-size 4 must divide dp_shard x cp = 2, the ranks expert parallelism borrows"
run_accel "$pipeline_recipe" --nproc 2 --parallelism-config-pp-size 2 --parallelism-config-pp-schedule ZBV
expect "an unknown schedule: exit 2" [ "$status" -eq 2 ]
expect "the refusal names the schedules" contains "$err" "InterleavedZeroBubble"

run_accel env --nproc 2
expect "env without sizes shows no mesh" contains "$out" "mesh: none (no parallelism_config sizes: plain data parallel over 2 rank(s))"

finish
