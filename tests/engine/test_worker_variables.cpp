// How a process tells that mpirun or srun started it as one rank of several,
// rather than as a launcher; and the sharding variables a launch hands its
// workers, only those it gives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"
#include "engine/protocol/worker_variables.h"

namespace {

// Sets the given variables for one check and removes them afterwards.
struct ScopedEnvironment {
  std::vector<std::string> names;
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [name, value] : vars) {
      ::setenv(name, value, 1);
      names.emplace_back(name);
    }
  }
  ~ScopedEnvironment() {
    for (const std::string& name : names) ::unsetenv(name.c_str());
  }
};

}  // namespace

TEST_CASE("a plain process is a launcher") {
  CHECK_FALSE(accel::started_as_mpi_rank());
}

TEST_CASE("mpirun's ranks are workers") {
  ScopedEnvironment env{{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}};
  CHECK(accel::started_as_mpi_rank());
}

TEST_CASE("srun's ranks are workers when there are several tasks") {
  SECTION("PMI") {
    ScopedEnvironment env{{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}};
    CHECK(accel::started_as_mpi_rank());
  }
  SECTION("PMIx with Slurm's task count") {
    ScopedEnvironment env{{"PMIX_RANK", "1"}, {"SLURM_NTASKS", "4"}};
    CHECK(accel::started_as_mpi_rank());
  }
}

TEST_CASE("a single task started by srun is a launcher") {
  ScopedEnvironment env{{"PMIX_RANK", "0"}, {"SLURM_NTASKS", "1"}};
  CHECK_FALSE(accel::started_as_mpi_rank());
}

namespace {

// The ACCEL_ZERO_STAGE, ACCEL_USE_FSDP and ACCEL_FSDP_* variables for a command line.
std::vector<std::string> sharding_variables(const std::vector<std::string>& args) {
  std::vector<std::string> vars = accel::worker_variables(accel::parse_launch_options(args, 1));
  vars.erase(std::remove_if(vars.begin(), vars.end(),
                            [](const std::string& var) {
                              return var.rfind("ACCEL_ZERO_STAGE=", 0) != 0 &&
                                     var.rfind("ACCEL_USE_FSDP=", 0) != 0 &&
                                     var.rfind("ACCEL_FSDP_", 0) != 0;
                            }),
             vars.end());
  return vars;
}

}  // namespace

TEST_CASE("the sharding a launch gives reaches the workers, and nothing it does not give") {
  using Vars = std::vector<std::string>;
  CHECK(sharding_variables({"t.lua"}).empty());
  CHECK(sharding_variables({"t.lua", "--zero-stage", "3"}) == Vars{"ACCEL_ZERO_STAGE=3"});
  CHECK(sharding_variables({"t.lua", "--use-deepspeed"}) == Vars{"ACCEL_ZERO_STAGE=2"});
  CHECK(sharding_variables({"t.lua", "--use-fsdp"}) == Vars{"ACCEL_USE_FSDP=1"});
  CHECK(sharding_variables({"t.lua", "--use-fsdp", "--fsdp-sharding-strategy", "1",
                            "--fsdp-auto-wrap-policy", "TRANSFORMER_BASED_WRAP",
                            "--fsdp-transformer-layer-cls-to-wrap", "Block,Attention",
                            "--fsdp-min-num-params", "1000", "--fsdp-offload-params", "false",
                            "--fsdp-state-dict-type", "SHARDED_STATE_DICT"}) ==
        Vars{"ACCEL_USE_FSDP=1", "ACCEL_FSDP_SHARDING_STRATEGY=FULL_SHARD",
             "ACCEL_FSDP_AUTO_WRAP_POLICY=TRANSFORMER_BASED_WRAP",
             "ACCEL_FSDP_TRANSFORMER_LAYER_CLS=Block,Attention", "ACCEL_FSDP_MIN_NUM_PARAMS=1000",
             "ACCEL_FSDP_CPU_OFFLOAD=false", "ACCEL_FSDP_STATE_DICT_TYPE=SHARDED_STATE_DICT"});
}
