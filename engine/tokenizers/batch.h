// Encodings of several texts as one rectangular batch: input ids,
// attention mask (1 for a text's ids, 0 for padding) and segments, each
// rows x columns, row-major. Padding is the reference's pad_encodings:
// every row to the longest (or to a fixed length), rounded up to a
// multiple, pad ids on the right or on the left (for generation).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/tokenizers/encoding.h"

namespace accel::tokenizers {

struct Padding {
  std::optional<std::size_t> length;  // a fixed length; none: the longest row
  std::size_t multiple_of = 0;        // 0: any length
  Side side = Side::Right;
  int32_t pad_id = 0;
  int32_t pad_type_id = 0;
};

struct Batch {
  std::size_t rows = 0;
  std::size_t columns = 0;
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> type_ids;
};

// `padding` nullptr: every encoding must already have the same length.
// Rows of different lengths after padding (a row longer than a fixed
// length) are refused, naming the row (1-based) and saying what to pass.
Batch make_batch(const std::vector<Encoding>& encodings, const Padding* padding);

}  // namespace accel::tokenizers
