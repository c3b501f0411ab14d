#include "engine/tokenizers/batch.h"

#include <algorithm>
#include <string>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {

Batch make_batch(const std::vector<Encoding>& encodings, const Padding* padding) {
  Batch b;
  b.rows = encodings.size();
  std::size_t longest = 0;
  for (const Encoding& e : encodings) longest = std::max(longest, e.size());
  std::size_t columns = longest;
  if (padding) {
    columns = padding->length.value_or(longest);
    if (padding->multiple_of > 0 && columns % padding->multiple_of != 0) {
      columns += padding->multiple_of - columns % padding->multiple_of;
    }
  }
  for (std::size_t r = 0; r < encodings.size(); ++r) {
    const std::size_t n = encodings[r].size();
    if (n == columns || (padding && n < columns)) continue;
    if (!padding) {
      throw TokenizerError("the texts encode to different lengths (text 1: " + std::to_string(encodings[0].size()) +
                           " ids, text " + std::to_string(r + 1) + ": " + std::to_string(n) +
                           "): pass padding = true to pad them to the longest");
    }
    throw TokenizerError("text " + std::to_string(r + 1) + " encodes to " + std::to_string(n) +
                         " ids, more than the padded length " + std::to_string(columns) +
                         ": pass truncation = true to cut it");
  }
  b.columns = columns;
  const std::size_t total = b.rows * columns;
  const int32_t pad_id = padding ? padding->pad_id : 0;
  const int32_t pad_type_id = padding ? padding->pad_type_id : 0;
  b.input_ids.assign(total, pad_id);
  b.attention_mask.assign(total, 0);
  b.type_ids.assign(total, pad_type_id);
  for (std::size_t r = 0; r < encodings.size(); ++r) {
    const Encoding& e = encodings[r];
    const std::size_t start = r * columns + (padding && padding->side == Side::Left ? columns - e.size() : 0);
    for (std::size_t k = 0; k < e.size(); ++k) {
      b.input_ids[start + k] = e.ids[k];
      b.attention_mask[start + k] = 1;
      b.type_ids[start + k] = e.type_ids[k];
    }
  }
  return b;
}

}  // namespace accel::tokenizers
