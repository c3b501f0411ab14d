#include <cstdlib>

#include "engine/checked_communicator.h"
#include "engine/collective_monitor.h"
#include "engine/communicator.h"
#include "engine/gloo_communicator.h"
#include "engine/monitored_communicator.h"
#ifdef ACCEL_WITH_MPI
#include "engine/mpi_communicator.h"
#endif
#include "engine/process_state.h"
#include "engine/single_process_communicator.h"

namespace accel {

std::string compiled_backends() {
#ifdef ACCEL_WITH_MPI
  return "gloo, mpi";
#else
  return "gloo";
#endif
}

namespace {

std::unique_ptr<Communicator> backend_communicator(const ProcessState& state,
                                                   CommunicatorOptions options) {
  const char* shared_memory = std::getenv("ACCEL_SHARED_MEMORY");
  if (shared_memory && std::string(shared_memory) == "0") options.shared_memory = false;
  if (options.backend == "gloo") return std::make_unique<GlooCommunicator>(state, options);
#ifdef ACCEL_WITH_MPI
  if (options.backend == "mpi") return std::make_unique<MpiCommunicator>();
#endif
  TORCH_CHECK(false, "unknown backend '", options.backend, "' (compiled in: ", compiled_backends(), ")");
}

}  // namespace

std::unique_ptr<Communicator> make_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options) {
  if (state.world_size == 1) return std::make_unique<SingleProcessCommunicator>();
  auto monitor = std::make_shared<CollectiveMonitor>(state.rank, state.world_size, state.master_addr,
                                                     state.master_port, options.timeout);
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
