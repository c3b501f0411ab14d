#include "engine/launch/worker_variables.h"

#include <cstdlib>
#include <sstream>
#include <utility>

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

// FSDP's settings, each in its variable when the launch gives it.
const std::pair<const char*, std::string FsdpSettings::*> kFsdpVariables[] = {
    {"ACCEL_FSDP_SHARDING_STRATEGY", &FsdpSettings::sharding_strategy},
    {"ACCEL_FSDP_AUTO_WRAP_POLICY", &FsdpSettings::auto_wrap_policy},
    {"ACCEL_FSDP_TRANSFORMER_LAYER_CLS", &FsdpSettings::transformer_layer_cls},
    {"ACCEL_FSDP_MIN_NUM_PARAMS", &FsdpSettings::min_num_params},
    {"ACCEL_FSDP_CPU_OFFLOAD", &FsdpSettings::cpu_offload},
    {"ACCEL_FSDP_STATE_DICT_TYPE", &FsdpSettings::state_dict_type},
    {"ACCEL_FSDP_SYNC_MODULE_STATES", &FsdpSettings::sync_module_states},
    {"ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING", &FsdpSettings::cpu_ram_efficient_loading},
};

}  // namespace

std::vector<std::string> worker_variables(const LaunchOptions& options) {
  std::vector<std::string> vars = {
      "ACCEL_THREADS=" + std::to_string(options.threads),
      "ACCEL_BACKEND=" + options.backend,
      "ACCEL_TIMEOUT=" + seconds_text(options.timeout_s),
      std::string("ACCEL_DEBUG=") + (options.debug ? "1" : "0"),
      "ACCEL_MAX_RESTARTS=" + std::to_string(options.max_restarts),
  };
  // A named backend is kept; the default lets a rank on a GPU take nccl.
  if (options.origins.count("--backend")) vars.push_back("ACCEL_BACKEND_GIVEN=1");
  if (!options.mixed_precision.empty()) {
    vars.push_back("ACCEL_MIXED_PRECISION=" + options.mixed_precision);
  }
  if (options.gradient_accumulation_steps > 0) {
    vars.push_back("ACCEL_GRADIENT_ACCUMULATION_STEPS=" +
                   std::to_string(options.gradient_accumulation_steps));
  }
  if (options.use_deepspeed) vars.push_back("ACCEL_ZERO_STAGE=" + std::to_string(options.zero_stage));
  if (options.use_deepspeed && !options.zero3_init_flag.empty()) {
    vars.push_back("ACCEL_ZERO3_INIT_FLAG=" + options.zero3_init_flag);
  }
  if (options.use_fsdp) vars.push_back("ACCEL_USE_FSDP=1");
  for (const auto& [name, setting] : kFsdpVariables) {
    const std::string& value = options.fsdp.*setting;
    if (!value.empty()) vars.push_back(std::string(name) + "=" + value);
  }
  return vars;
}

bool started_as_mpi_rank() {
  if (std::getenv("OMPI_COMM_WORLD_RANK")) return true;
  if (!std::getenv("PMI_RANK") && !std::getenv("PMIX_RANK")) return false;
  const char* tasks = std::getenv("PMI_SIZE");
  if (!tasks) tasks = std::getenv("SLURM_NTASKS");
  return tasks && std::atoi(tasks) > 1;
}

void read_worker_variables(LaunchOptions& options) {
  if (const char* threads = std::getenv("ACCEL_THREADS")) {
    options.threads = static_cast<int>(positive_number("ACCEL_THREADS", threads));
  }
  if (const char* backend = std::getenv("ACCEL_BACKEND")) options.backend = backend;
  if (const char* given = std::getenv("ACCEL_BACKEND_GIVEN"); given && std::string(given) == "1") {
    options.origins["--backend"] = "the launcher";
  }
  if (const char* timeout = std::getenv("ACCEL_TIMEOUT")) {
    options.timeout_s = positive_number("ACCEL_TIMEOUT", timeout);
  }
  if (const char* debug = std::getenv("ACCEL_DEBUG")) options.debug = std::string(debug) == "1";
  if (const char* precision = std::getenv("ACCEL_MIXED_PRECISION")) {
    options.mixed_precision = precision;
  }
}

}  // namespace accel
