#include <cstdlib>

#include "engine/comm/checked_communicator.h"
#include "engine/comm/collective_monitor.h"
#include "engine/comm/communicator.h"
#include "engine/comm/device_routed_communicator.h"
#include "engine/comm/gloo_communicator.h"
#include "engine/comm/monitored_communicator.h"
#ifdef ACCEL_WITH_MPI
#include "engine/comm/mpi_communicator.h"
#endif
#ifdef ACCEL_WITH_CUDA
#include "engine/comm/nccl_communicator.h"
#endif
#include "engine/comm/shared_memory_communicator.h"
#include "engine/comm/single_process_communicator.h"
#include "engine/process_state.h"
#include "engine/protocol/accel_variables.h"

namespace accel {

std::string compiled_backends() {
  std::string names = "gloo";
#ifdef ACCEL_WITH_MPI
  names += ", mpi";
#endif
#ifdef ACCEL_WITH_CUDA
  names += ", nccl";
#endif
  return names;
}

namespace {

// Gloo, behind shared memory for all-reduces when every rank is on this
// machine (and there is more than one).
std::unique_ptr<Communicator> gloo_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options) {
  std::unique_ptr<Communicator> comm = std::make_unique<GlooCommunicator>(state, options);
  if (options.shared_memory && state.world_size > 1 && state.local_world_size == state.world_size) {
    comm = std::make_unique<SharedMemoryCommunicator>(std::move(comm), options.timeout, options.shm_prefix);
  }
  return comm;
}

std::unique_ptr<Communicator> backend_communicator(const ProcessState& state,
                                                   CommunicatorOptions options) {
  const char* shared_memory = std::getenv(variables::kSharedMemory);
  if (shared_memory && std::string(shared_memory) == "0") options.shared_memory = false;
  if (options.backend == "gloo") return gloo_communicator(state, options);
#ifdef ACCEL_WITH_MPI
  if (options.backend == "mpi") return std::make_unique<MpiCommunicator>();
#endif
#ifdef ACCEL_WITH_CUDA
  if (options.backend == "nccl") {
    TORCH_CHECK(options.cuda_device >= 0,
                "the nccl backend reduces CUDA tensors, and this rank has no GPU (device cpu)");
    auto host = gloo_communicator(state, options);
    auto device = std::make_unique<NcclCommunicator>(state, options, options.cuda_device);
    return std::make_unique<DeviceRoutedCommunicator>(std::move(host), std::move(device));
  }
#endif
  TORCH_CHECK(false, "unknown backend '", options.backend, "' (compiled in: ", compiled_backends(), ")");
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options) {
  // One rank needs no peers; NCCL asked for by name still runs, so that a
  // machine with one GPU can check it (accel-run test, tests/gpu).
  if (state.world_size == 1 && !(options.backend == "nccl" && options.backend_given)) {
    return std::make_unique<SingleProcessCommunicator>();
  }
  auto monitor = std::make_shared<CollectiveMonitor>(state.rank, state.world_size, state.store_address(),
                                                     options.timeout, options.error_file);
  std::unique_ptr<Communicator> comm;
  {
    // Joining the group is the first collective: a rank that never joins
    // shows up in stall reports and in the timeout message like any other.
    MonitoredSpan span(*monitor, monitor->enter("init", current_call_site(), ""), options.timeout);
    try {
      comm = backend_communicator(state, options);
    } catch (const std::exception&) {
      span.throw_if_timed_out();
      throw;
    }
  }
  if (options.debug) comm = std::make_unique<CheckedCommunicator>(std::move(comm));
  return std::make_unique<MonitoredCommunicator>(std::move(comm), std::move(monitor),
                                                 options.timeout);
}

}  // namespace accel
