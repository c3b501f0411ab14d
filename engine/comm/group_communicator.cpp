#include "engine/comm/group_communicator.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <stdexcept>

#include "engine/comm/device_routed_communicator.h"
#include "engine/comm/gloo_communicator.h"
#ifdef ACCEL_WITH_MPI
#include "engine/comm/mpi_group_communicator.h"
#endif
#ifdef ACCEL_WITH_CUDA
#include "engine/comm/nccl_communicator.h"
#endif
#include "engine/comm/shared_memory_communicator.h"
#include "engine/comm/single_process_communicator.h"
#include "engine/process_state.h"
#include "engine/protocol/accel_variables.h"

namespace accel {
namespace {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return "[" + out + "]";
}

void check_ranks(const ProcessState& state, const std::string& name, const std::vector<int>& ranks) {
  const std::string where = "group '" + name + "' of ranks " + rank_list(ranks);
  if (ranks.empty()) throw std::invalid_argument(where + ": a group needs at least one rank");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= state.world_size) {
      throw std::invalid_argument(where + ": rank " + std::to_string(ranks[i]) + " is not in a world of " +
                                  std::to_string(state.world_size) + " ranks");
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      throw std::invalid_argument(where + ": ranks must be ascending without repeats");
    }
  }
  if (std::find(ranks.begin(), ranks.end(), state.rank) == ranks.end()) {
    throw std::invalid_argument(where + ": this process (rank " + std::to_string(state.rank) +
                                ") is not a member; only members make a group");
  }
}

// The store prefix of this process's n-th making of `name`: the members run
// the same recipe, so they count alike, and a remade group never meets the
// keys of an earlier one.
std::string next_store_prefix(const std::string& name, const std::vector<int>& ranks) {
  static std::mutex mutex;
  static std::map<std::string, int> made;
  const std::string key = "group/" + name + "/" + rank_list(ranks);
  std::lock_guard<std::mutex> lock(mutex);
  return key + "/" + std::to_string(made[key]++);
}

// One backend's keys under the communicator's prefix ("gloo" and "nccl"
// for the world).
std::string backend_prefix(const std::string& store_prefix, const std::string& backend) {
  return store_prefix.empty() ? backend : store_prefix + "/" + backend;
}

std::unique_ptr<Communicator> gloo_communicator(const ProcessState& state, const CommunicatorOptions& options,
                                                const std::string& store_prefix, int group_rank,
                                                int group_size) {
  std::unique_ptr<Communicator> comm = std::make_unique<GlooCommunicator>(
      state, options, backend_prefix(store_prefix, "gloo"), group_rank, group_size);
  const char* shared_memory = std::getenv(variables::kSharedMemory);
  const bool shm_allowed = options.shared_memory && !(shared_memory && std::string(shared_memory) == "0");
  if (shm_allowed && group_size > 1 && state.local_world_size == state.world_size) {
    comm = std::make_unique<SharedMemoryCommunicator>(std::move(comm), options.timeout, options.shm_prefix);
  }
  return comm;
}

}  // namespace

std::unique_ptr<Communicator> make_c10d_communicator(const ProcessState& state,
                                                     const CommunicatorOptions& options,
                                                     const std::string& store_prefix, int group_rank,
                                                     int group_size) {
  if (options.backend == "gloo") return gloo_communicator(state, options, store_prefix, group_rank, group_size);
#ifdef ACCEL_WITH_CUDA
  if (options.backend == "nccl") {
    auto host = gloo_communicator(state, options, store_prefix, group_rank, group_size);
    auto device = std::make_unique<NcclCommunicator>(state, options, backend_prefix(store_prefix, "nccl"),
                                                     group_rank, group_size);
    return std::make_unique<DeviceRoutedCommunicator>(std::move(host), std::move(device));
  }
#endif
  throw std::invalid_argument("unknown backend '" + options.backend + "' (compiled in: " + compiled_backends() +
                              ")");
}

std::unique_ptr<Communicator> make_group_communicator(const ProcessState& state,
                                                      const CommunicatorOptions& options,
                                                      const std::string& name,
                                                      const std::vector<int>& ranks) {
  check_ranks(state, name, ranks);
  if (ranks.size() == 1) return std::make_unique<SingleProcessCommunicator>();
#ifdef ACCEL_WITH_MPI
  if (options.backend == "mpi") return make_mpi_group_communicator(ranks, options.timeout);
#endif
  const int group_rank = static_cast<int>(std::find(ranks.begin(), ranks.end(), state.rank) - ranks.begin());
  return make_c10d_communicator(state, options, next_store_prefix(name, ranks), group_rank,
                                static_cast<int>(ranks.size()));
}

}  // namespace accel
