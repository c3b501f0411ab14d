// What encoding one text (or one pair of texts) gives: ids and the segment
// ("token type") of each, and the reference's truncation of them
// (utils/truncation.rs): before the post-processor adds its special
// tokens, to max_length less what it will add.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace accel::tokenizers {

struct Encoding {
  std::vector<int32_t> ids;
  std::vector<int32_t> type_ids;

  std::size_t size() const { return ids.size(); }
  // Appends `other` (the reference's Encoding::merge_with, for ids).
  void append(const Encoding& other) {
    ids.insert(ids.end(), other.ids.begin(), other.ids.end());
    type_ids.insert(type_ids.end(), other.type_ids.begin(), other.type_ids.end());
  }
};

enum class Side { Left, Right };

enum class TruncationStrategy {
  LongestFirst,  // cut the longer of a pair first (transformers' truncation = true)
  OnlyFirst,
  OnlySecond,
};

struct Truncation {
  std::size_t max_length = 0;
  TruncationStrategy strategy = TruncationStrategy::LongestFirst;
  Side side = Side::Right;  // which end loses tokens
};

// Cuts `first` and `pair` (nullptr for a single text) to `t.max_length`
// ids together, as the reference's truncate_encodings does (stride 0).
// Throws when only_first or only_second cannot get there.
void truncate(Encoding& first, Encoding* pair, const Truncation& t);

}  // namespace accel::tokenizers
