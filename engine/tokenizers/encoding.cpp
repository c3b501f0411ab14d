#include "engine/tokenizers/encoding.h"

#include <algorithm>
#include <string>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

// Keeps `length` ids: the first ones, or with Side::Left the last ones.
void cut(Encoding& e, std::size_t length, Side side) {
  if (length >= e.size()) return;
  const auto keep = [&](std::vector<int32_t>& v) {
    if (side == Side::Left) v.erase(v.begin(), v.end() - static_cast<std::ptrdiff_t>(length));
    v.resize(length);
  };
  keep(e.ids);
  keep(e.type_ids);
}

}  // namespace

void truncate(Encoding& first, Encoding* pair, const Truncation& t) {
  if (t.max_length == 0) {  // nothing is left of either, whatever the strategy
    cut(first, 0, t.side);
    if (pair) cut(*pair, 0, t.side);
    return;
  }
  const std::size_t total = first.size() + (pair ? pair->size() : 0);
  if (total <= t.max_length) return;
  const std::size_t to_remove = total - t.max_length;
  switch (t.strategy) {
    case TruncationStrategy::LongestFirst: {
      if (!pair) {
        cut(first, t.max_length, t.side);
        return;
      }
      // As the reference: the shorter keeps what it can of its length,
      // the longer takes the rest; past that, the halves.
      std::size_t n1 = first.size(), n2 = pair->size();
      const bool swapped = n1 > n2;
      if (swapped) std::swap(n1, n2);
      n2 = n1 > t.max_length ? n1 : std::max(n1, t.max_length - n1);
      if (n1 + n2 > t.max_length) {
        n1 = t.max_length / 2;
        n2 = n1 + t.max_length % 2;
      }
      if (swapped) std::swap(n1, n2);
      cut(first, n1, t.side);
      cut(*pair, n2, t.side);
      return;
    }
    case TruncationStrategy::OnlyFirst:
    case TruncationStrategy::OnlySecond: {
      const bool second = t.strategy == TruncationStrategy::OnlySecond;
      if (second && !pair) throw TokenizerError("truncation only_second needs a pair of texts");
      Encoding& target = second ? *pair : first;
      if (target.size() <= to_remove) {
        throw TokenizerError(std::string("truncation ") + (second ? "only_second" : "only_first") +
                             " cannot cut the pair to " + std::to_string(t.max_length) + " ids: the " +
                             (second ? "second" : "first") + " text has " + std::to_string(target.size()) +
                             " and " + std::to_string(to_remove) + " must go");
      }
      cut(target, target.size() - to_remove, t.side);
      return;
    }
  }
}

}  // namespace accel::tokenizers
