// The model of a tokenizer.json: what turns one pre-tokenized piece into
// ids. accel reads the reference's BPE (bpe_model.h: byte-level BPE as in
// GPT-2, Llama 3 and Qwen2; byte fallback as in Llama 2 and Mistral) and
// WordPiece (wordpiece_model.h: BERT); WordLevel and Unigram files are
// refused, naming the type and the file.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/json/json_node.h"
#include "engine/tokenizers/piece.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of `piece` (not empty) to `ids`. A model may keep a
  // cache: one tokenizer is used by one thread at a time.
  virtual void tokenize(Piece& piece, std::vector<int32_t>& ids) const = 0;
  virtual std::optional<int32_t> token_to_id(std::string_view token) const = 0;
  virtual const std::string* id_to_token(int64_t id) const = 0;  // nullptr when none
  virtual std::size_t vocab_size() const = 0;
};

// The model tokenizer.json's "model" describes.
std::unique_ptr<Model> make_model(const JsonNode& node);

}  // namespace accel::tokenizers
