// The weights and tokenizers a warm worker keeps between its runs
// (engine/formats/kept_weights.h, engine/tokenizers/kept_tokenizers.h):
// one store of each for the worker's life, as the kept communicator is
// (distributed_ops.h). A cold worker keeps none: its one run has nothing to
// pass on.
#pragma once

namespace accel::formats {
class KeptWeights;
}  // namespace accel::formats
namespace accel::tokenizers {
class KeptTokenizers;
}  // namespace accel::tokenizers

namespace accel::lua {

// Called once by a warm worker before its first run.
void keep_weights_between_states();
// The stores, or null in a cold worker.
formats::KeptWeights* kept_weights();
tokenizers::KeptTokenizers* kept_tokenizers();
// After each run: forgets what that run did not load.
void end_kept_weights_run();

}  // namespace accel::lua
