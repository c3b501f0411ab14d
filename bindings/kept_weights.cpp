#include "bindings/kept_weights.h"

#include <memory>

#include "engine/formats/kept_weights.h"
#include "engine/tokenizers/kept_tokenizers.h"

namespace accel::lua {
namespace {

std::unique_ptr<formats::KeptWeights> g_kept_weights;
std::unique_ptr<tokenizers::KeptTokenizers> g_kept_tokenizers;

}  // namespace

void keep_weights_between_states() {
  g_kept_weights = std::make_unique<formats::KeptWeights>();
  g_kept_tokenizers = std::make_unique<tokenizers::KeptTokenizers>();
}

formats::KeptWeights* kept_weights() { return g_kept_weights.get(); }

tokenizers::KeptTokenizers* kept_tokenizers() { return g_kept_tokenizers.get(); }

void end_kept_weights_run() {
  if (g_kept_weights) g_kept_weights->end_run();
  if (g_kept_tokenizers) g_kept_tokenizers->end_run();
}

}  // namespace accel::lua
