#include "engine/chat_template/assistant_mask.h"

namespace accel::chat_template {
namespace {

// The smallest k in [0, n) with decoded(k + 1) > bytes (or >= when `or_equal`), else n.
std::size_t first_ending_past(std::size_t n, std::size_t bytes, bool or_equal,
                              const std::function<std::size_t(std::size_t)>& decoded) {
  std::size_t lo = 0, hi = n;
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    const std::size_t end = decoded(mid + 1);
    if (end > bytes || (or_equal && end == bytes)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

}  // namespace

std::vector<int32_t> assistant_mask(std::size_t tokens, const std::vector<std::pair<std::size_t, std::size_t>>& spans,
                                    const std::function<std::size_t(std::size_t)>& decoded) {
  std::vector<int32_t> mask(tokens, 0);
  for (const auto& [begin, end] : spans) {
    if (begin >= end) continue;
    const std::size_t first = first_ending_past(tokens, begin, false, decoded);
    if (first == tokens) continue;
    std::size_t last = first_ending_past(tokens, end, true, decoded);
    if (last == tokens) last = tokens - 1;
    for (std::size_t k = first; k <= last; ++k) mask[k] = 1;
  }
  return mask;
}

}  // namespace accel::chat_template
