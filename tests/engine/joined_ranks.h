// Ranks as forked processes joined into one process group through a store on
// this machine, for the tests of collectives and of what is built on them.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/process_state.h"
#include "engine/launch/store_server.h"
#include "tests/engine/forked_ranks.h"

namespace accel::testing {

inline const std::string kToken = "test-token";

// Rank `rank` of `world`, all on this machine, joined through `store`.
inline std::unique_ptr<Communicator> join(int rank, int world, const StoreServer& store, bool shared_memory = true) {
  ProcessState state;
  state.rank = rank;
  state.local_rank = rank;
  state.world_size = world;
  state.local_world_size = world;
  state.master_port = store.port();
  state.rdzv_token = kToken;
  CommunicatorOptions options;
  options.timeout = std::chrono::seconds(30);
  options.shared_memory = shared_memory;
  return make_communicator(state, options);
}

// Runs body(rank, comm) in `world` forked processes; returns their exit codes.
inline std::vector<int> run_ranks(int world, const std::function<void(int, Communicator&)>& body,
                                  bool shared_memory = true) {
  StoreServer store("127.0.0.1", 0, kToken);
  return run_forked(world, [&](int rank) { body(rank, *join(rank, world, store, shared_memory)); });
}

}  // namespace accel::testing
