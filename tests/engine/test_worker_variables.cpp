// How a process tells that mpirun or srun started it as one rank of several,
// rather than as a launcher.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/launch/worker_variables.h"

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
