#include "bindings/kept_weights.h"

#include <memory>

#include "engine/formats/kept_weights.h"

namespace accel::lua {
namespace {

std::unique_ptr<formats::KeptWeights> g_kept_weights;

}  // namespace

void keep_weights_between_states() { g_kept_weights = std::make_unique<formats::KeptWeights>(); }

formats::KeptWeights* kept_weights() { return g_kept_weights.get(); }

void end_kept_weights_run() {
  if (g_kept_weights) g_kept_weights->end_run();
}

}  // namespace accel::lua
