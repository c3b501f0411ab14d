// Where this process sits in the run, read once from the launch environment
// (the torchrun contract: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR, MASTER_PORT), or from OpenMPI's variables under mpirun, and
// the token of the launcher's store (ACCEL_RDZV_TOKEN).
#pragma once
#include <string>

#include "engine/protocol/store_connection.h"

namespace accel {

struct ProcessState {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::string rdzv_token;

  // The launcher's rendezvous store.
  StoreAddress store_address() const {
    return {master_addr, static_cast<uint16_t>(master_port), rdzv_token};
  }

  bool is_main_process() const { return rank == 0; }
  bool is_local_main_process() const { return local_rank == 0; }

  // Reads the environment; throws std::runtime_error naming the variable
  // when one is present but malformed or inconsistent (RANK >= WORLD_SIZE).
  static ProcessState from_environment();
};

}  // namespace accel
