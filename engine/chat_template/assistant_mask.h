// transformers' assistant_masks: 1 for each token whose text overlaps a
// span a {% generation %} block printed, 0 elsewhere. transformers reads
// each token's character offsets from the fast tokenizer; here a token's
// bytes are found by decoding: token k covers [decoded(k), decoded(k + 1))
// where decoded(n) is the byte length of the first n ids' text. That is
// the text's own offsets wherever decoding gives the text back (byte-level
// BPE, as the chat models' tokenizers), and costs O(log n) decodes a span.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace accel::chat_template {

std::vector<int32_t> assistant_mask(std::size_t tokens, const std::vector<std::pair<std::size_t, std::size_t>>& spans,
                                    const std::function<std::size_t(std::size_t)>& decoded);

}  // namespace accel::chat_template
