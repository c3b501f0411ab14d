#include "engine/formats/kept_weights.h"

namespace accel::formats {

c10::optional<at::Tensor> KeptWeights::find(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return c10::nullopt;
  if (it->second.alias._version() != it->second.version) {
    entries_.erase(it);
    return c10::nullopt;
  }
  it->second.used = true;
  ++found_;
  return it->second.alias.detach();
}

void KeptWeights::keep(const std::string& key, const at::Tensor& t) {
  Entry& entry = entries_[key];
  entry.alias = t.detach();
  entry.version = entry.alias._version();
  entry.used = true;
}

void KeptWeights::end_run() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second.used) {
      it = entries_.erase(it);
    } else {
      it->second.used = false;
      ++it;
    }
  }
}

KeptWeights::Counts KeptWeights::counts() const {
  return {static_cast<int64_t>(entries_.size()), found_};
}

}  // namespace accel::formats
