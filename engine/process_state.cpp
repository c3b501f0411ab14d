#include "engine/process_state.h"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "engine/protocol/accel_variables.h"

namespace accel {
namespace {

const char* first_set(std::initializer_list<const char*> names, const char** found) {
  for (const char* name : names) {
    if (const char* value = std::getenv(name)) {
      *found = name;
      return value;
    }
  }
  return nullptr;
}

// Reads the first of `names` that is set, as a non-negative integer.
int read_int(std::initializer_list<const char*> names, int fallback) {
  const char* name = nullptr;
  const char* value = first_set(names, &name);
  if (!value) return fallback;
  char* end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  if (end == value || *end != '\0' || parsed < 0 || parsed > (1 << 24)) {
    throw std::runtime_error(std::string("environment variable ") + name + "='" + value +
                             "' is not a non-negative integer");
  }
  return static_cast<int>(parsed);
}

}  // namespace

ProcessState ProcessState::from_environment() {
  ProcessState s;
  // torchrun's variables first; OpenMPI's when started by mpirun; PMI's or
  // Slurm's when started by srun (--mpi=pmi2 or pmix).
  s.rank = read_int({"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, 0);
  s.world_size = read_int({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, 1);
  s.local_rank = read_int({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"}, s.rank);
  s.local_world_size =
      read_int({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, s.world_size);
  if (const char* addr = std::getenv("MASTER_ADDR")) s.master_addr = addr;
  s.master_port = read_int({"MASTER_PORT"}, 0);
  if (const char* token = std::getenv(variables::kRdzvToken)) s.rdzv_token = token;
  if (s.world_size < 1) throw std::runtime_error("WORLD_SIZE must be at least 1");
  if (s.rank >= s.world_size) {
    throw std::runtime_error("RANK=" + std::to_string(s.rank) + " is not below WORLD_SIZE=" +
                             std::to_string(s.world_size));
  }
  if (s.local_rank >= s.local_world_size) {
    throw std::runtime_error("LOCAL_RANK=" + std::to_string(s.local_rank) +
                             " is not below LOCAL_WORLD_SIZE=" +
                             std::to_string(s.local_world_size));
  }
  return s;
}

}  // namespace accel
