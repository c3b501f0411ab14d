#include "engine/comm/checked_communicator.h"
#include "engine/comm/collective_monitor.h"
#include "engine/comm/communicator.h"
#include "engine/comm/group_communicator.h"
#include "engine/comm/monitored_communicator.h"
#ifdef ACCEL_WITH_MPI
#include "engine/comm/mpi_communicator.h"
#endif
#include "engine/comm/single_process_communicator.h"
#include "engine/process_state.h"

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

std::unique_ptr<Communicator> backend_communicator(const ProcessState& state,
                                                   const CommunicatorOptions& options) {
#ifdef ACCEL_WITH_MPI
  if (options.backend == "mpi") return std::make_unique<MpiCommunicator>();
#endif
  return make_c10d_communicator(state, options, "", state.rank, state.world_size);
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
