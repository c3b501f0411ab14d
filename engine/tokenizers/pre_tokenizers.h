// Pre-tokenizers: tokenizer.json's "pre_tokenizer", which cuts normalized
// text into the words the model tokenizes one by one. The types are the
// reference's (pre_tokenizers/*.rs) that the GPT-2, Llama, Mistral, Qwen2
// and BERT families' files use, and their near kin:
//   ByteLevel (GPT-2's word pattern, the byte alphabet), Split (a pattern
//   and one of the five delimiter behaviours), Metaspace (▁ for spaces),
//   BertPreTokenizer, Whitespace, WhitespaceSplit, Punctuation, Digits,
//   CharDelimiterSplit, Sequence
// Any other type is refused, naming it and where it is.
#pragma once
#include <memory>
#include <vector>

#include "engine/json/json_node.h"
#include "engine/tokenizers/piece.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Gives `out` the pieces `piece` splits into, in order; empty pieces are
  // dropped by the caller.
  virtual void split(Piece&& piece, PieceSink out) const = 0;
};

// The steps a tokenizer.json "pre_tokenizer" value describes, Sequences
// flattened: each step splits every piece the step before gave.
std::vector<std::unique_ptr<PreTokenizer>> make_pre_tokenizers(const JsonNode& node);

}  // namespace accel::tokenizers
