# Sharding options end to end: what every rank's environment holds
# (ACCEL_ZERO_STAGE, ACCEL_USE_FSDP, ACCEL_FSDP_*) for the command-line
# options, for an Accelerate-style config file (distributed_type with
# deepspeed_config or fsdp_config) and for both, the command line winning;
# `accel-run env` showing the sharding in force; `accel-run config` asking
# for it; and each mistake refused before any rank starts, with its message.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"
unset ACCEL_CONFIG_FILE

names=(ACCEL_ZERO_STAGE ACCEL_USE_FSDP ACCEL_FSDP_SHARDING_STRATEGY ACCEL_FSDP_AUTO_WRAP_POLICY
       ACCEL_FSDP_TRANSFORMER_LAYER_CLS ACCEL_FSDP_MIN_NUM_PARAMS ACCEL_FSDP_CPU_OFFLOAD
       ACCEL_FSDP_STATE_DICT_TYPE ACCEL_FSDP_SYNC_MODULE_STATES ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING
       ACCEL_ZERO3_INIT_FLAG)
# Each rank writes what it sees of the variables to DIR/seen.RANK (under
# mpirun, a rank's number is OpenMPI's).
cat >"$work/vars.lua" <<LUA
local rank = os.getenv("RANK") or os.getenv("OMPI_COMM_WORLD_RANK")
local out = assert(io.open(arg[1] .. "/seen." .. rank, "w"))
for name in ("${names[*]}"):gmatch("%S+") do
  local value = os.getenv(name)
  out:write(name, value and "=" .. value or " unset", "\n")
end
out:close()
LUA

# workers_see WHAT NAME=VALUE... -- ARGS...: accel-run ARGS runs the recipe on
# two ranks, and each sees exactly the variables given, the others unset.
workers_see() {
  local what=$1 wanted=() expected="" name var line
  shift
  while [ "$1" != "--" ]; do wanted+=("$1"); shift; done
  shift
  for name in "${names[@]}"; do
    line="$name unset"
    for var in "${wanted[@]}"; do [[ $var == "$name="* ]] && line=$var; done
    expected+="$line"$'\n'
  done
  rm -f "$work"/seen.*
  run_accel "$@" --nproc 2 --threads 1 "$work/vars.lua" -- "$work"
  expect "$what: exit code 0" [ "$status" -eq 0 ]
  for rank in 0 1; do
    local seen
    seen=$(cat "$work/seen.$rank" 2>/dev/null)
    expect "$what: rank $rank sees ${wanted[*]:-no sharding}" [ "$seen" == "${expected%$'\n'}" ]
    [ "$seen" == "${expected%$'\n'}" ] || diff <(echo "$seen") <(printf '%s' "$expected")
  done
}

# refused WHAT WANTED ARGS...: accel-run ARGS exits 2 with WANTED on stderr
# (whole lines), and no rank runs.
refused() {
  local what=$1 wanted=$2
  shift 2
  rm -f "$work"/seen.*
  run_accel "$@" --nproc 2 "$work/vars.lua" -- "$work"
  expect "$what: exit code 2" [ "$status" -eq 2 ]
  expect "$what: the message" grep -qxF -- "accel-run: error: $wanted" "$work/err"
  expect "$what: no rank ran" [ -z "$(ls "$work"/seen.* 2>/dev/null)" ]
}

# --- the command line
workers_see "no sharding" --
workers_see "--zero-stage 3" ACCEL_ZERO_STAGE=3 -- --zero-stage 3
workers_see "--use-deepspeed takes Accelerate's stage" ACCEL_ZERO_STAGE=2 -- --use-deepspeed
workers_see "--zero3-init-flag" ACCEL_ZERO_STAGE=3 ACCEL_ZERO3_INIT_FLAG=true -- --zero-stage 3 --zero3-init-flag yes
workers_see "--use-fsdp alone" ACCEL_USE_FSDP=1 -- --use-fsdp
workers_see "every FSDP option, in their normal spelling" \
  ACCEL_USE_FSDP=1 ACCEL_FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP \
  ACCEL_FSDP_AUTO_WRAP_POLICY=TRANSFORMER_BASED_WRAP ACCEL_FSDP_TRANSFORMER_LAYER_CLS=Block,Attention \
  ACCEL_FSDP_MIN_NUM_PARAMS=1000 ACCEL_FSDP_CPU_OFFLOAD=true ACCEL_FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT \
  ACCEL_FSDP_SYNC_MODULE_STATES=true ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING=true -- \
  --use-fsdp --fsdp-sharding-strategy 2 --fsdp-auto-wrap-policy TRANSFORMER_BASED_WRAP \
  --fsdp-transformer-layer-cls-to-wrap "Block, Attention" --fsdp-min-num-params=1000 \
  --fsdp-offload-params yes --fsdp-state-dict-type SHARDED_STATE_DICT \
  --fsdp-sync-module-states true --fsdp-cpu-ram-efficient-loading true
workers_see "--fsdp-offload-params false is passed on" ACCEL_USE_FSDP=1 ACCEL_FSDP_CPU_OFFLOAD=false -- \
  --use-fsdp --fsdp-offload-params false

# --- the config file, as `accelerate config` writes it
cat >"$work/fsdp.yaml" <<'YAML'
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: 1
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: Block
  fsdp_use_orig_params: true
machine_rank: 0
main_training_function: main
mixed_precision: 'no'
num_machines: 1
use_cpu: true
YAML
fsdp_vars=(ACCEL_USE_FSDP=1 ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD ACCEL_FSDP_AUTO_WRAP_POLICY=TRANSFORMER_BASED_WRAP
           ACCEL_FSDP_TRANSFORMER_LAYER_CLS=Block ACCEL_FSDP_CPU_OFFLOAD=false
           ACCEL_FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT ACCEL_FSDP_SYNC_MODULE_STATES=true
           ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING=true)
workers_see "an FSDP config file" "${fsdp_vars[@]}" -- --config "$work/fsdp.yaml"
ACCEL_CONFIG_FILE="$work/fsdp.yaml" workers_see "an FSDP config file from \$ACCEL_CONFIG_FILE" "${fsdp_vars[@]}" --

cat >"$work/deepspeed.yaml" <<'YAML'
compute_environment: LOCAL_MACHINE
deepspeed_config:
  gradient_accumulation_steps: 1
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
  zero_stage: 3
distributed_type: DEEPSPEED
YAML
workers_see "a DeepSpeed config file" ACCEL_ZERO_STAGE=3 ACCEL_ZERO3_INIT_FLAG=false -- --config "$work/deepspeed.yaml"
printf 'distributed_type: DEEPSPEED\n' >"$work/deepspeed_bare.yaml"
workers_see "DEEPSPEED without a stage takes Accelerate's" ACCEL_ZERO_STAGE=2 -- --config "$work/deepspeed_bare.yaml"

# --- the command line wins
workers_see "an FSDP option over the file's, the rest from the file" \
  ACCEL_USE_FSDP=1 ACCEL_FSDP_SHARDING_STRATEGY=NO_SHARD ACCEL_FSDP_AUTO_WRAP_POLICY=TRANSFORMER_BASED_WRAP \
  ACCEL_FSDP_TRANSFORMER_LAYER_CLS=Block,Attention ACCEL_FSDP_CPU_OFFLOAD=false \
  ACCEL_FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT ACCEL_FSDP_SYNC_MODULE_STATES=true \
  ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING=true -- \
  --config "$work/fsdp.yaml" --fsdp-sharding-strategy NO_SHARD --fsdp-transformer-layer-cls-to-wrap Block,Attention
workers_see "--zero-stage over an FSDP file drops its FSDP settings" ACCEL_ZERO_STAGE=1 -- \
  --config "$work/fsdp.yaml" --zero-stage 1
workers_see "--use-fsdp over a DeepSpeed file drops its stage" ACCEL_USE_FSDP=1 -- \
  --config "$work/deepspeed.yaml" --use-fsdp
workers_see "--zero-stage over the file's stage" ACCEL_ZERO_STAGE=1 ACCEL_ZERO3_INIT_FLAG=false -- \
  --config "$work/deepspeed.yaml" --zero-stage 1

if command -v mpirun >/dev/null; then
  workers_see "through mpirun (--backend mpi)" ACCEL_ZERO_STAGE=3 -- --backend mpi --zero-stage 3
else
  echo "skipped: the mpi backend (no mpirun)"
fi

# --- accel-run env: the sharding in force, each setting with where it came from
run_accel env --nproc 1
expect "env without sharding" grep -qxF "  distributed_type: 'NO'  # default: no sharding" "$work/out"
run_accel env --config "$work/fsdp.yaml" --fsdp-sharding-strategy NO_SHARD
expect "env with FSDP: exit code 0" [ "$status" -eq 0 ]
expect "env with FSDP: its section, the file's settings and the command line's" contains "$out" \
"  distributed_type: FSDP  # $work/fsdp.yaml:3
  fsdp_config:
    fsdp_sharding_strategy: NO_SHARD  # command line
    fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP  # $work/fsdp.yaml:7
    fsdp_transformer_layer_cls_to_wrap: Block  # $work/fsdp.yaml:15
    fsdp_offload_params: false  # $work/fsdp.yaml:11
    fsdp_state_dict_type: SHARDED_STATE_DICT  # $work/fsdp.yaml:13"
run_accel env --config "$work/fsdp.yaml" --zero-stage 2
expect "env with --zero-stage over an FSDP file" contains "$out" \
"  distributed_type: DEEPSPEED  # command line
  deepspeed_config:
    zero_stage: 2  # command line"
expect "env with --zero-stage over an FSDP file: no FSDP left" eval '! contains "$out" fsdp_'
run_accel env --config "$work/deepspeed_bare.yaml"
expect "env with DEEPSPEED and no stage" contains "$out" \
"  distributed_type: DEEPSPEED  # $work/deepspeed_bare.yaml:1
  deepspeed_config:
    zero_stage: 2  # default"
run_accel env --zero-stage 5
expect "env refuses a bad stage like a run does" grep -qxF \
  "accel-run: error: --zero-stage expects an integer from 1 to 3, got '5'" "$work/err"

# --- accel-run config asks for the sharding, and its file runs
run_accel config --config "$work/asked.yaml" <<<$'1\n2\n\n\n\nfsdp\nFSDP\n2\nTRANSFORMER_BASED_WRAP\nBlock\nyes\n\n'
expect "config with FSDP exits 0" [ "$status" -eq 0 ]
expect "config explains a misspelt sharding and asks again" \
  contains "$out" "got 'fsdp' (did you mean 'FSDP'?); try again"
expect "config writes fsdp_config below distributed_type" contains "$(cat "$work/asked.yaml")" \
"distributed_type: 'FSDP'
fsdp_config:
  fsdp_sharding_strategy: 2
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_transformer_layer_cls_to_wrap: 'Block'
  fsdp_offload_params: true
  fsdp_state_dict_type: FULL_STATE_DICT"
workers_see "the file accel-run config wrote" ACCEL_USE_FSDP=1 ACCEL_FSDP_SHARDING_STRATEGY=SHARD_GRAD_OP \
  ACCEL_FSDP_AUTO_WRAP_POLICY=TRANSFORMER_BASED_WRAP ACCEL_FSDP_TRANSFORMER_LAYER_CLS=Block \
  ACCEL_FSDP_CPU_OFFLOAD=true ACCEL_FSDP_STATE_DICT_TYPE=FULL_STATE_DICT -- --config "$work/asked.yaml"
run_accel config --config "$work/ds.yaml" <<<$'1\n1\n\n\n\nDEEPSPEED\n3\n'
workers_see "a DeepSpeed file accel-run config wrote" ACCEL_ZERO_STAGE=3 -- --config "$work/ds.yaml"

# --- what the loading flags mean to a recipe: acc:build_model builds the
# model empty (on the meta device) on ranks other than the main process
cat >"$work/build.lua" <<'LUA'
local acc = accel.Accelerator()
local model = acc:build_model(function() return accel.nn.Linear(4, 4) end)
print("built on " .. model.weight.device)
LUA
# built_as WHAT RANK0 RANK1 ARGS...: the devices each rank's weights are on.
built_as() {
  local what=$1 first=$2 second=$3
  shift 3
  run_accel "$@" --nproc 2 --threads 1 "$work/build.lua"
  expect "$what: exit code 0" [ "$status" -eq 0 ]
  expect "$what: rank 0 builds on $first" grep -qxF "built on $first" "$work/out"
  expect "$what: rank 1 builds on $second" grep -qxF "[rank 1] built on $second" "$work/out"
}
built_as "--zero3-init-flag at stage 3" cpu meta --zero-stage 3 --zero3-init-flag true
built_as "stage 3 without --zero3-init-flag" cpu cpu --zero-stage 3
built_as "--zero3-init-flag below stage 3 (as Accelerate, only stage 3 uses it)" cpu cpu --zero-stage 2 --zero3-init-flag true
built_as "--fsdp-cpu-ram-efficient-loading" cpu meta --use-fsdp --fsdp-cpu-ram-efficient-loading true
run_accel --use-fsdp --fsdp-sync-module-states false --nproc 2 --threads 1 "$work/build.lua"
expect "--fsdp-sync-module-states false: the recipe fails" [ "$status" -ne 0 ]
expect "--fsdp-sync-module-states false: the message names it" contains "$err" \
  "sync_module_states = false (fsdp_sync_module_states, from accel-run) is not supported: prepare always starts every rank from the main process's weights"

# --- mistakes, each before any rank starts
refused "a stage above 3" "--zero-stage expects an integer from 1 to 3, got '4'" --zero-stage 4
refused "a stage of 0" "--zero-stage expects an integer from 1 to 3, got '0'" --zero-stage 0
refused "a stage that is no number" "--zero-stage expects an integer from 1 to 3, got 'two'" --zero-stage two
refused "a ZeRO stage and FSDP" \
  "--zero-stage (DeepSpeed ZeRO) and --use-fsdp (FSDP) both choose how the model is sharded; give one of them" \
  --zero-stage 2 --use-fsdp
refused "an FSDP option without FSDP" \
  "--fsdp-sharding-strategy is a setting of FSDP, which this launch does not use: give --use-fsdp (distributed_type: FSDP in the config file)" \
  --fsdp-sharding-strategy FULL_SHARD
refused "an FSDP option with ZeRO" \
  "--fsdp-state-dict-type is a setting of FSDP, but this launch shards with DeepSpeed ZeRO, as the command line says" \
  --zero-stage 3 --fsdp-state-dict-type FULL_STATE_DICT
refused "TRANSFORMER_BASED_WRAP without classes" \
  "--fsdp-auto-wrap-policy is TRANSFORMER_BASED_WRAP, which needs the classes of the modules to wrap: give --fsdp-transformer-layer-cls-to-wrap NAMES (fsdp_transformer_layer_cls_to_wrap in fsdp_config), e.g. Block" \
  --use-fsdp --fsdp-auto-wrap-policy TRANSFORMER_BASED_WRAP
refused "a strategy accel does not have" \
  "unsupported --fsdp-sharding-strategy 'HYBRID_SHARD' (supported: FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3))" \
  --use-fsdp --fsdp-sharding-strategy HYBRID_SHARD
refused "a strategy number out of range" \
  "unsupported --fsdp-sharding-strategy '4' (supported: FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3))" \
  --use-fsdp --fsdp-sharding-strategy 4
refused "a misspelt wrap policy" \
  "unsupported --fsdp-auto-wrap-policy 'SIZE_BASED_WARP' (supported: TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP) (did you mean 'SIZE_BASED_WRAP'?)" \
  --use-fsdp --fsdp-auto-wrap-policy SIZE_BASED_WARP
refused "a parameter count that is no number" \
  "--fsdp-min-num-params expects an integer from 0 to 1000000000000000, got '1e8'" \
  --use-fsdp --fsdp-min-num-params 1e8
refused "a negative parameter count" \
  "--fsdp-min-num-params expects an integer from 0 to 1000000000000000, got '-5'" \
  --use-fsdp --fsdp-min-num-params=-5
refused "offload that is not true or false" "--fsdp-offload-params expects true or false, got 'cpu'" \
  --use-fsdp --fsdp-offload-params cpu
refused "an empty class name" \
  "--fsdp-transformer-layer-cls-to-wrap expects names separated by commas (Block,Attention), got 'Block,,Attention'" \
  --use-fsdp --fsdp-transformer-layer-cls-to-wrap Block,,Attention
refused "zero3_init_flag that is not true or false" "--zero3-init-flag expects true or false, got 'maybe'" \
  --zero-stage 3 --zero3-init-flag maybe
refused "Accelerate's underscore spelling" "unknown option '--zero_stage' (did you mean '--zero-stage'?)" \
  --zero_stage 2

# refused_file WHAT YAML WANTED: the same for a config file holding YAML.
refused_file() {
  printf '%s' "$2" >"$work/bad.yaml"
  refused "$1" "$3" --config "$work/bad.yaml"
}
bad=$work/bad.yaml
refused_file "a stage above 3 in the file" $'distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 4\n' \
  "$bad:3: key 'deepspeed_config.zero_stage' expects an integer from 1 to 3, got '4'"
refused_file "a misspelt distributed_type" $'distributed_type: FSPD\n' \
  "$bad:1: key 'distributed_type' expects DEEPSPEED or FSDP to shard, or another of Accelerate's types to shard nothing, got 'FSPD' (did you mean 'FSDP'?)"
refused_file "a ZeRO stage in an FSDP file" $'distributed_type: FSDP\ndeepspeed_config:\n  zero_stage: 2\n' \
  "key 'deepspeed_config.zero_stage' ($bad:3) is a setting of DeepSpeed ZeRO, but this launch shards with FSDP, as key 'distributed_type' ($bad:1) says"
refused_file "fsdp_config without distributed_type FSDP" $'distributed_type: MULTI_CPU\nfsdp_config:\n  fsdp_offload_params: true\n' \
  "key 'fsdp_config.fsdp_offload_params' ($bad:3) is a setting of FSDP, which this launch does not use: give --use-fsdp (distributed_type: FSDP in the config file)"
refused_file "TRANSFORMER_BASED_WRAP without classes in the file" \
  $'distributed_type: FSDP\nfsdp_config:\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n' \
  "key 'fsdp_config.fsdp_auto_wrap_policy' ($bad:3) is TRANSFORMER_BASED_WRAP, which needs the classes of the modules to wrap: give --fsdp-transformer-layer-cls-to-wrap NAMES (fsdp_transformer_layer_cls_to_wrap in fsdp_config), e.g. Block"
refused_file "a misspelt key in fsdp_config" $'distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_stratgy: 1\n' \
  "$bad:3: unknown key 'fsdp_config.fsdp_sharding_stratgy' (did you mean 'fsdp_config.fsdp_sharding_strategy'?)"
refused_file "a bad strategy in the file" $'distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HYBRID_SHARD\n' \
  "$bad:3: key 'fsdp_config.fsdp_sharding_strategy' expects one of FULL_SHARD (1), SHARD_GRAD_OP (2), NO_SHARD (3), got 'HYBRID_SHARD'"
refused_file "a parameter count that is no number in the file" $'distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: lots\n' \
  "$bad:3: key 'fsdp_config.fsdp_min_num_params' expects an integer from 0 to 1000000000000000, got 'lots'"
refused_file "fsdp_config that is no mapping" $'distributed_type: FSDP\nfsdp_config: FULL_SHARD\n' \
  "$bad:2: key 'fsdp_config' expects FSDP's settings, indented below it as key: value lines, got 'FULL_SHARD'"

finish
