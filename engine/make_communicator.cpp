#include "engine/communicator.h"
#include "engine/gloo_communicator.h"
#include "engine/process_state.h"
#include "engine/single_process_communicator.h"

namespace accel {

std::unique_ptr<Communicator> make_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options) {
  if (state.world_size == 1) return std::make_unique<SingleProcessCommunicator>();
  if (options.backend == "gloo") return std::make_unique<GlooCommunicator>(state, options);
  TORCH_CHECK(false, "unknown backend '", options.backend, "' (compiled in: gloo)");
}

}  // namespace accel
