// Normalizers: tokenizer.json's "normalizer", applied to each stretch of
// text between added tokens before it is cut into words. The types are the
// reference's (normalizers/*.rs in Hugging Face tokenizers) that the
// GPT-2, Llama, Mistral, Qwen2 and BERT families' files use, and their
// near kin:
//   BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase)
//   NFC NFD NFKC NFKD, Lowercase, Strip, StripAccents, Nmt
//   Replace (String or Regex pattern), Prepend, ByteLevel, Sequence
// Any other type ("Precompiled", SentencePiece's compiled character map) is
// refused, naming it and where it is.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/json/json_node.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` (valid UTF-8) normalized, in place.
  virtual void normalize(std::string& text) const = 0;

  // Where the step sits in its file ("'tok.json': normalizer.normalizers[2]"), for errors.
  std::string where;
};

// The normalizer a tokenizer.json "normalizer" value describes; a Sequence
// becomes its steps in order, each flattened in turn.
std::vector<std::unique_ptr<Normalizer>> make_normalizers(const JsonNode& node);

}  // namespace accel::tokenizers
