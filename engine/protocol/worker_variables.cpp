#include "engine/protocol/worker_variables.h"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "engine/protocol/accel_variables.h"

namespace accel {
namespace {

std::string seconds_text(double seconds) {
  std::ostringstream out;
  out.precision(17);
  out << seconds;
  return out.str();
}

// The variable's value as a positive number, or throws naming it.
double positive_number(const char* name, const char* text) {
  char* end = nullptr;
  double value = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(value > 0)) {
    throw LaunchOptionsError(std::string("environment variable ") + name + "='" + text +
                             "' is not a positive number");
  }
  return value;
}

// The variable's value as a whole number >= 0, or throws naming it.
int whole_number(const char* name, const char* text) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value < 0 || value > 1000000) {
    throw LaunchOptionsError(std::string("environment variable ") + name + "='" + text +
                             "' is not a whole number");
  }
  return static_cast<int>(value);
}

// FSDP's settings, each in its variable when the launch gives it.
const std::pair<const char*, std::string FsdpSettings::*> kFsdpVariables[] = {
    {variables::kFsdpShardingStrategy, &FsdpSettings::sharding_strategy},
    {variables::kFsdpAutoWrapPolicy, &FsdpSettings::auto_wrap_policy},
    {variables::kFsdpTransformerLayerCls, &FsdpSettings::transformer_layer_cls},
    {variables::kFsdpMinNumParams, &FsdpSettings::min_num_params},
    {variables::kFsdpCpuOffload, &FsdpSettings::cpu_offload},
    {variables::kFsdpStateDictType, &FsdpSettings::state_dict_type},
    {variables::kFsdpSyncModuleStates, &FsdpSettings::sync_module_states},
    {variables::kFsdpCpuRamEfficientLoading, &FsdpSettings::cpu_ram_efficient_loading},
};

// The mesh's sizes, each in its variable when the launch gives it.
const std::pair<const char*, int ParallelismSizes::*> kParallelismVariables[] = {
    {variables::kParallelismDpReplicateSize, &ParallelismSizes::dp_replicate},
    {variables::kParallelismDpShardSize, &ParallelismSizes::dp_shard},
    {variables::kParallelismCpSize, &ParallelismSizes::cp},
    {variables::kParallelismTpSize, &ParallelismSizes::tp},
    {variables::kParallelismPpSize, &ParallelismSizes::pp},
    {variables::kParallelismEpSize, &ParallelismSizes::ep},
    {variables::kParallelismPpMicrobatches, &ParallelismSizes::pp_microbatches},
    {variables::kParallelismPpVirtualStages, &ParallelismSizes::pp_virtual_stages},
};

}  // namespace

std::vector<std::string> worker_variables(const LaunchOptions& options) {
  std::vector<std::string> vars = {
      std::string(variables::kThreads) + "=" + std::to_string(options.threads),
      std::string(variables::kBackend) + "=" + options.backend,
      std::string(variables::kTimeout) + "=" + seconds_text(options.timeout_s),
      std::string(variables::kDebug) + "=" + (options.debug ? "1" : "0"),
      std::string(variables::kMaxRestarts) + "=" + std::to_string(options.max_restarts),
  };
  // A named backend is kept; the default lets a rank on a GPU take nccl.
  if (options.origins.count("--backend")) vars.push_back(std::string(variables::kBackendGiven) + "=1");
  if (!options.mixed_precision.empty()) {
    vars.push_back(std::string(variables::kMixedPrecision) + "=" + options.mixed_precision);
  }
  if (options.gradient_accumulation_steps > 0) {
    vars.push_back(std::string(variables::kGradientAccumulationSteps) + "=" +
                   std::to_string(options.gradient_accumulation_steps));
  }
  if (options.use_deepspeed) vars.push_back(std::string(variables::kZeroStage) + "=" + std::to_string(options.zero_stage));
  if (options.use_deepspeed && !options.zero3_init_flag.empty()) {
    vars.push_back(std::string(variables::kZero3InitFlag) + "=" + options.zero3_init_flag);
  }
  if (options.use_fsdp) vars.push_back(std::string(variables::kUseFsdp) + "=1");
  for (const auto& [name, setting] : kFsdpVariables) {
    const std::string& value = options.fsdp.*setting;
    if (!value.empty()) vars.push_back(std::string(name) + "=" + value);
  }
  for (const auto& [name, size] : kParallelismVariables) {
    if (options.parallelism.*size > 0) vars.push_back(std::string(name) + "=" + std::to_string(options.parallelism.*size));
  }
  if (!options.parallelism.pp_schedule.empty()) {
    vars.push_back(std::string(variables::kParallelismPpSchedule) + "=" + options.parallelism.pp_schedule);
  }
  return vars;
}

WorkerHandoff worker_handoff() {
  auto read = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value ? value : "");
  };
  return {read(variables::kRdzvToken), read(variables::kShmPrefix), read(variables::kErrorFile)};
}

namespace {

// The launcher's hand-off to one worker: how it joins its run, where its
// errors go, what it is.
constexpr const char* kHandoffVariables[] = {variables::kRdzvToken, variables::kShmPrefix, variables::kErrorFile,
                                             variables::kRole,      variables::kErrorDir,  variables::kControlFd};
// The run's settings, which recipes may read as Accelerate's scripts read
// ACCELERATE_*.
constexpr const char* kSettingVariables[] = {
    variables::kThreads,       variables::kBackend,        variables::kBackendGiven,
    variables::kTimeout,       variables::kDebug,          variables::kMaxRestarts,
    variables::kRestartCount,  variables::kMixedPrecision, variables::kGradientAccumulationSteps,
    variables::kZeroStage,     variables::kZero3InitFlag,  variables::kUseFsdp,
    variables::kParallelismPpSchedule};

}  // namespace

bool is_worker_variable(const std::string& name) {
  for (const char* known : kHandoffVariables) {
    if (name == known) return true;
  }
  for (const char* known : kSettingVariables) {
    if (name == known) return true;
  }
  for (const auto& [known, setting] : kFsdpVariables) {
    if (name == known) return true;
  }
  for (const auto& [known, size] : kParallelismVariables) {
    if (name == known) return true;
  }
  return false;
}

void drop_worker_variables() {
  for (const char* name : kHandoffVariables) ::unsetenv(name);
}

bool started_as_mpi_rank() {
  if (std::getenv("OMPI_COMM_WORLD_RANK")) return true;
  if (!std::getenv("PMI_RANK") && !std::getenv("PMIX_RANK")) return false;
  const char* tasks = std::getenv("PMI_SIZE");
  if (!tasks) tasks = std::getenv("SLURM_NTASKS");
  return tasks && std::atoi(tasks) > 1;
}

void read_worker_variables(LaunchOptions& options) {
  if (const char* threads = std::getenv(variables::kThreads)) {
    options.threads = static_cast<int>(positive_number(variables::kThreads, threads));
  }
  if (const char* backend = std::getenv(variables::kBackend)) options.backend = backend;
  if (const char* given = std::getenv(variables::kBackendGiven); given && std::string(given) == "1") {
    options.origins["--backend"] = "the launcher";
  }
  if (const char* timeout = std::getenv(variables::kTimeout)) {
    options.timeout_s = positive_number(variables::kTimeout, timeout);
  }
  if (const char* debug = std::getenv(variables::kDebug)) options.debug = std::string(debug) == "1";
  if (const char* precision = std::getenv(variables::kMixedPrecision)) {
    options.mixed_precision = precision;
  }
  if (const char* steps = std::getenv(variables::kGradientAccumulationSteps)) {
    options.gradient_accumulation_steps = whole_number(variables::kGradientAccumulationSteps, steps);
  }
  if (const char* stage = std::getenv(variables::kZeroStage)) {
    options.use_deepspeed = true;
    options.zero_stage = whole_number(variables::kZeroStage, stage);
  }
  if (const char* flag = std::getenv(variables::kZero3InitFlag)) options.zero3_init_flag = flag;
  if (const char* fsdp = std::getenv(variables::kUseFsdp)) options.use_fsdp = std::string(fsdp) == "1";
  for (const auto& [name, setting] : kFsdpVariables) {
    if (const char* value = std::getenv(name)) options.fsdp.*setting = value;
  }
  for (const auto& [name, size] : kParallelismVariables) {
    if (const char* value = std::getenv(name)) options.parallelism.*size = whole_number(name, value);
  }
  if (const char* schedule = std::getenv(variables::kParallelismPpSchedule)) options.parallelism.pp_schedule = schedule;
  if (const char* restarts = std::getenv(variables::kMaxRestarts)) {
    options.max_restarts = whole_number(variables::kMaxRestarts, restarts);
  }
  if (const char* count = std::getenv(variables::kRestartCount)) {
    options.restart_count = whole_number(variables::kRestartCount, count);
  }
}

}  // namespace accel
