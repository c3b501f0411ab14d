#include "engine/protocol/launch_option_table.h"

#include <algorithm>
#include <sstream>

namespace accel::options {
namespace {

// nccl only in a build on a CUDA LibTorch (scripts/build-cuda.sh).
#if defined(ACCEL_WITH_MPI) && defined(ACCEL_WITH_CUDA)
constexpr const char* kBackends = "gloo mpi nccl";
#elif defined(ACCEL_WITH_MPI)
constexpr const char* kBackends = "gloo mpi";
#elif defined(ACCEL_WITH_CUDA)
constexpr const char* kBackends = "gloo nccl";
#else
constexpr const char* kBackends = "gloo";
#endif

// The apply and show of a row whose value is one of FSDP's settings, kept as text.
template <std::string FsdpSettings::*setting>
void set_fsdp(LaunchOptions& o, const Value& v) {
  o.fsdp.*setting = v.text;
}
template <std::string FsdpSettings::*setting>
std::string show_fsdp(const LaunchOptions& o) {
  return o.fsdp.*setting;
}

// The apply and show of a row whose value is one of the mesh's sizes ("" where not given).
template <int ParallelismSizes::*size>
void set_size(LaunchOptions& o, const Value& v) {
  o.parallelism.*size = static_cast<int>(v.integer);
}
template <int ParallelismSizes::*size>
std::string show_size(const LaunchOptions& o) {
  return o.parallelism.*size > 0 ? std::to_string(o.parallelism.*size) : "";
}

// Every option accel-run knows. A new option is a new row. A config key
// "section.key" is `key` in the file's mapping `section` (kShardingMethods).
const OptionRow kOptions[] = {
    {"--nproc", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, nullptr,
     "worker processes to start on this machine (default 1)",
     [](LaunchOptions& o, const Value& v) { o.nproc = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nproc); }},
    {"--num-processes", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr, "num_processes",
     "processes on all machines together, as Accelerate counts them; --nproc wins",
     [](LaunchOptions& o, const Value& v) { o.num_processes = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nproc * o.nnodes); }},
    {"--threads", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, "num_threads",
     "intra-op threads per rank (default: CPU cores / nproc, at least 1)",
     [](LaunchOptions& o, const Value& v) { o.threads = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.threads); }},
    {"--nnodes", nullptr, ValueKind::integer, "N", 1, 4096, nullptr, "num_machines",
     "machines in the run, each starting its own accel-run (default 1)",
     [](LaunchOptions& o, const Value& v) { o.nnodes = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.nnodes); }},
    {"--node-rank", nullptr, ValueKind::integer, "K", 0, 4095, nullptr, "machine_rank",
     "this machine's number, 0 to nnodes-1; node 0 hosts the rendezvous store (default 0)",
     [](LaunchOptions& o, const Value& v) { o.node_rank = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.node_rank); }},
    {"--master-addr", nullptr, ValueKind::text, "HOST", 0, 0, nullptr, "main_process_ip",
     "address of node 0, where the rendezvous store listens (default 127.0.0.1)",
     [](LaunchOptions& o, const Value& v) { o.master_addr = v.text; },
     [](const LaunchOptions& o) { return o.master_addr; }},
    {"--master-port", nullptr, ValueKind::integer, "PORT", 0, 65535, nullptr, "main_process_port",
     "port of the rendezvous store (default 0: a free port; several nodes need one)",
     [](LaunchOptions& o, const Value& v) { o.master_port = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.master_port); }},
    {"--backend", nullptr, ValueKind::text, "NAME", 0, 0, kBackends, "backend",
     "collective backend: gloo, mpi through mpirun, or nccl for GPU ranks (default gloo; "
     "nccl when every local rank has a GPU of its own)",
     [](LaunchOptions& o, const Value& v) { o.backend = v.text; },
     [](const LaunchOptions& o) { return o.backend; }},
    {"--mixed-precision", nullptr, ValueKind::text, "MODE", 0, 0, "no bf16 fp16 fp8",
     "mixed_precision", "the Accelerator's default mixed precision: no, bf16, fp16 or fp8",
     [](LaunchOptions& o, const Value& v) { o.mixed_precision = v.text; },
     [](const LaunchOptions& o) {
       return o.mixed_precision.empty() ? std::string("'no'") : "'" + o.mixed_precision + "'";
     }},
    {"--gradient-accumulation-steps", nullptr, ValueKind::integer, "N", 1, 1e6, nullptr,
     "gradient_accumulation_steps", "the Accelerator's default gradient accumulation steps",
     [](LaunchOptions& o, const Value& v) {
       o.gradient_accumulation_steps = static_cast<int>(v.integer);
     },
     [](const LaunchOptions& o) { return std::to_string(std::max(1, o.gradient_accumulation_steps)); }},
    // The file says --use-deepspeed and --use-fsdp with distributed_type (kShardingMethods).
    {"--use-deepspeed", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "the Accelerator's default sharding is DeepSpeed's ZeRO, stage 2 unless --zero-stage says",
     [](LaunchOptions& o, const Value& v) { o.use_deepspeed = v.integer != 0; }, nullptr},
    {"--zero-stage", nullptr, ValueKind::integer, "N", 1, 3, nullptr, "deepspeed_config.zero_stage",
     "DeepSpeed ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters; "
     "implies --use-deepspeed",
     [](LaunchOptions& o, const Value& v) { o.zero_stage = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.zero_stage); }},
    {"--zero3-init-flag", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr, "deepspeed_config.zero3_init_flag",
     "at stage 3, acc:build_model builds the model empty on ranks other than the main process",
     [](LaunchOptions& o, const Value& v) { o.zero3_init_flag = v.text; },
     [](const LaunchOptions& o) { return o.zero3_init_flag; }},
    {"--use-fsdp", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "the Accelerator's default sharding is FSDP, with the --fsdp-* settings below",
     [](LaunchOptions& o, const Value& v) { o.use_fsdp = v.integer != 0; }, nullptr},
    {"--fsdp-sharding-strategy", nullptr, ValueKind::numbered, "STRATEGY", 0, 0,
     "FULL_SHARD SHARD_GRAD_OP NO_SHARD", "fsdp_config.fsdp_sharding_strategy",
     "what FSDP shards: FULL_SHARD (1), SHARD_GRAD_OP (2) or NO_SHARD (3)",
     set_fsdp<&FsdpSettings::sharding_strategy>, show_fsdp<&FsdpSettings::sharding_strategy>},
    {"--fsdp-auto-wrap-policy", nullptr, ValueKind::text, "POLICY", 0, 0,
     "TRANSFORMER_BASED_WRAP SIZE_BASED_WRAP NO_WRAP", "fsdp_config.fsdp_auto_wrap_policy",
     "which modules FSDP makes units of their own: TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP",
     set_fsdp<&FsdpSettings::auto_wrap_policy>, show_fsdp<&FsdpSettings::auto_wrap_policy>},
    {"--fsdp-transformer-layer-cls-to-wrap", nullptr, ValueKind::names, "NAMES", 0, 0, nullptr,
     "fsdp_config.fsdp_transformer_layer_cls_to_wrap",
     "the module classes TRANSFORMER_BASED_WRAP wraps, comma-separated (Block,Attention)",
     set_fsdp<&FsdpSettings::transformer_layer_cls>, show_fsdp<&FsdpSettings::transformer_layer_cls>},
    {"--fsdp-min-num-params", nullptr, ValueKind::integer, "N", 0, 1e15, nullptr,
     "fsdp_config.fsdp_min_num_params", "the parameters that make a unit under SIZE_BASED_WRAP",
     set_fsdp<&FsdpSettings::min_num_params>, show_fsdp<&FsdpSettings::min_num_params>},
    {"--fsdp-offload-params", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_offload_params", "whether FSDP keeps parameters and gradients in CPU memory",
     set_fsdp<&FsdpSettings::cpu_offload>, show_fsdp<&FsdpSettings::cpu_offload>},
    {"--fsdp-state-dict-type", nullptr, ValueKind::text, "TYPE", 0, 0,
     "FULL_STATE_DICT SHARDED_STATE_DICT", "fsdp_config.fsdp_state_dict_type",
     "how save_state writes an FSDP model: FULL_STATE_DICT or SHARDED_STATE_DICT (a file per rank)",
     set_fsdp<&FsdpSettings::state_dict_type>, show_fsdp<&FsdpSettings::state_dict_type>},
    {"--fsdp-sync-module-states", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_sync_module_states",
     "every rank starts from the main process's weights; always so in accel, false is refused",
     set_fsdp<&FsdpSettings::sync_module_states>, show_fsdp<&FsdpSettings::sync_module_states>},
    {"--fsdp-cpu-ram-efficient-loading", nullptr, ValueKind::boolean, "true|false", 0, 0, nullptr,
     "fsdp_config.fsdp_cpu_ram_efficient_loading",
     "acc:build_model builds the model empty on ranks other than the main process",
     set_fsdp<&FsdpSettings::cpu_ram_efficient_loading>, show_fsdp<&FsdpSettings::cpu_ram_efficient_loading>},
    // The mesh's sizes, in the file below parallelism_config: (kSettingsSections).
    {"--parallelism-config-dp-replicate-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_dp_replicate_size",
     "the Accelerator's default mesh: ranks that replicate the model (data parallel)",
     set_size<&ParallelismSizes::dp_replicate>, show_size<&ParallelismSizes::dp_replicate>},
    {"--parallelism-config-dp-shard-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_dp_shard_size",
     "the Accelerator's default mesh: ranks that shard the model (FSDP)",
     set_size<&ParallelismSizes::dp_shard>, show_size<&ParallelismSizes::dp_shard>},
    {"--parallelism-config-tp-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_tp_size",
     "the Accelerator's default mesh: ranks that split each layer (tensor parallel)",
     set_size<&ParallelismSizes::tp>, show_size<&ParallelismSizes::tp>},
    {"--parallelism-config-cp-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_cp_size",
     "the Accelerator's default mesh: ranks that split each sequence (context parallel)",
     set_size<&ParallelismSizes::cp>, show_size<&ParallelismSizes::cp>},
    {"--parallelism-config-pp-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_pp_size",
     "the Accelerator's default mesh: pipeline stages, the outermost dim (pipeline parallel)",
     set_size<&ParallelismSizes::pp>, show_size<&ParallelismSizes::pp>},
    {"--parallelism-config-ep-size", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_ep_size",
     "the Accelerator's default mesh: ranks of dp_shard x cp that split the experts (expert parallel)",
     set_size<&ParallelismSizes::ep>, show_size<&ParallelismSizes::ep>},
    {"--parallelism-config-pp-schedule", nullptr, ValueKind::text, "NAME", 0, 0,
     "GPipe 1F1B Interleaved1F1B InterleavedZeroBubble", "parallelism_config.parallelism_config_pp_schedule",
     "the pipeline's schedule (default 1F1B)",
     [](LaunchOptions& o, const Value& v) { o.parallelism.pp_schedule = v.text; },
     [](const LaunchOptions& o) { return o.parallelism.pp_schedule; }},
    {"--parallelism-config-pp-microbatches", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_pp_microbatches",
     "micro-batches each batch is cut into for the pipeline (default pp_size)",
     set_size<&ParallelismSizes::pp_microbatches>, show_size<&ParallelismSizes::pp_microbatches>},
    {"--parallelism-config-pp-virtual-stages", nullptr, ValueKind::integer, "N", 1, 1 << 20, nullptr,
     "parallelism_config.parallelism_config_pp_virtual_stages",
     "pipeline stages per rank, for the interleaved schedules (default 1)",
     set_size<&ParallelismSizes::pp_virtual_stages>, show_size<&ParallelismSizes::pp_virtual_stages>},
    {"--debug", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, "debug",
     "check before every collective that all ranks call the same one with the same shapes",
     [](LaunchOptions& o, const Value& v) { o.debug = v.integer != 0; },
     [](const LaunchOptions& o) { return std::string(o.debug ? "true" : "false"); }},
    // No config key: watching is how one session is run, not a setting of the run.
    {"--watch", nullptr, ValueKind::none, nullptr, 0, 0, nullptr, nullptr,
     "keep the workers warm and rerun the recipe each time a Lua file of its folder is saved",
     [](LaunchOptions& o, const Value& v) { o.watch = v.integer != 0; }, nullptr},
    {"--timeout", nullptr, ValueKind::seconds, "SECONDS", 0.1, 1e8, nullptr, "timeout",
     "fail the run when a collective takes longer, naming it and the missing ranks (default 1800)",
     [](LaunchOptions& o, const Value& v) { o.timeout_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.timeout_s); }},
    {"--stall-report", nullptr, ValueKind::seconds, "SECONDS", 0, 1e8, nullptr, "stall_report",
     "report ranks waiting this long in a collective, and those missing (default 60; 0: never)",
     [](LaunchOptions& o, const Value& v) { o.stall_report_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.stall_report_s); }},
    {"--max-restarts", nullptr, ValueKind::integer, "K", 0, 1000, nullptr, "max_restarts",
     "restart all workers up to K times after a failure (default 0)",
     [](LaunchOptions& o, const Value& v) { o.max_restarts = static_cast<int>(v.integer); },
     [](const LaunchOptions& o) { return std::to_string(o.max_restarts); }},
    {"--log-dir", nullptr, ValueKind::text, "DIR", 0, 0, nullptr, "log_dir",
     "also write each rank's output to DIR/rank-N.log",
     [](LaunchOptions& o, const Value& v) { o.log_dir = v.text; },
     [](const LaunchOptions& o) { return o.log_dir.empty() ? std::string("''") : o.log_dir; }},
    {"--rdzv-timeout", nullptr, ValueKind::seconds, "SECONDS", 0.1, 1e8, nullptr, "rdzv_timeout",
     "how long the nodes' launchers wait for each other (default 300)",
     [](LaunchOptions& o, const Value& v) { o.rdzv_timeout_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.rdzv_timeout_s); }},
    // No config key: a secret belongs in the environment, not in a file.
    {"--rdzv-token", nullptr, ValueKind::text, "SECRET", 0, 0, nullptr, nullptr,
     "secret every connection to the store presents; the same on every node "
     "(default $ACCEL_RDZV_TOKEN; one node: generated)",
     [](LaunchOptions& o, const Value& v) { o.rdzv_token = v.text; }, nullptr},
    {"--grace-period", nullptr, ValueKind::seconds, "SECONDS", 0, 3600, nullptr, "grace_period",
     "time the workers get between SIGTERM and SIGKILL when a run stops (default 5)",
     [](LaunchOptions& o, const Value& v) { o.grace_period_s = v.number; },
     [](const LaunchOptions& o) { return number_text(o.grace_period_s); }},
    {"--config", nullptr, ValueKind::text, "FILE", 0, 0, nullptr, nullptr,
     "read options from this YAML file (default: $ACCEL_CONFIG_FILE, else the file "
     "`accel-run config` writes)",
     [](LaunchOptions& o, const Value& v) { o.config = v.text; }, nullptr},
    {"--help", "-h", ValueKind::none, nullptr, 0, 0, nullptr, nullptr, "show this help and exit",
     [](LaunchOptions& o, const Value&) { o.help = true; }, nullptr},
};

// Keys of Accelerate's default_config.yaml that mean nothing here (GPUs,
// TPUs, the Python entry point): accepted, so such a file loads, and ignored.
const char* const kAccelerateOnlyKeys[] = {
    "compute_environment", "downcast_bf16", "dynamo_config",
    "enable_cpu_affinity", "gpu_ids", "main_training_function", "rdzv_backend",
    "same_network", "tpu_env", "tpu_use_cluster", "tpu_use_sudo", "use_cpu",
};

const ShardingMethod kShardingMethods[] = {
    {"DEEPSPEED", "--use-deepspeed", "--zero-stage", &LaunchOptions::use_deepspeed,
     "DeepSpeed ZeRO", "deepspeed_config",
     "deepspeed_exclusion_filter deepspeed_hostfile deepspeed_inclusion_filter "
     "deepspeed_moe_layer_cls_names deepspeed_multinode_launcher gradient_accumulation_steps "
     "gradient_clipping offload_optimizer_device offload_optimizer_nvme_path offload_param_device "
     "offload_param_nvme_path zero3_save_16bit_model"},
    {"FSDP", "--use-fsdp", nullptr, &LaunchOptions::use_fsdp, "FSDP", "fsdp_config",
     "fsdp_activation_checkpointing fsdp_backward_prefetch fsdp_backward_prefetch_policy "
     "fsdp_forward_prefetch fsdp_ignored_modules fsdp_use_orig_params fsdp_version"},
};

const SettingsSection kSettingsSections[] = {
    {"parallelism_config", "the device mesh"},
};

}  // namespace

Rows<OptionRow> option_rows() { return {std::begin(kOptions), std::end(kOptions)}; }

Rows<ShardingMethod> sharding_methods() { return {std::begin(kShardingMethods), std::end(kShardingMethods)}; }

Rows<SettingsSection> settings_sections() { return {std::begin(kSettingsSections), std::end(kSettingsSections)}; }

const OptionRow* find_option(const std::string& name) {
  for (const OptionRow& row : kOptions) {
    if (name == row.name || (row.alias && name == row.alias)) return &row;
  }
  return nullptr;
}

const OptionRow& row_named(const char* name) { return *find_option(name); }

const OptionRow* find_config_key(const std::string& key) {
  for (const OptionRow& row : kOptions) {
    if (row.config_key && key == row.config_key) return &row;
  }
  return nullptr;
}

std::vector<std::string> option_names() {
  std::vector<std::string> names;
  for (const OptionRow& row : kOptions) names.emplace_back(row.name);
  return names;
}

bool accelerate_only_key(const std::string& key) {
  return std::any_of(std::begin(kAccelerateOnlyKeys), std::end(kAccelerateOnlyKeys),
                     [&](const char* name) { return key == name; });
}

std::string number_text(double value) {
  if (value == static_cast<double>(static_cast<long long>(value))) {
    return std::to_string(static_cast<long long>(value));
  }
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace accel::options
