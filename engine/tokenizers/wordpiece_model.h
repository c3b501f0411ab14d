// WordPiece as the reference's model does it (models/wordpiece/ in Hugging
// Face tokenizers; BERT): the longest vocabulary entry that starts the
// word, then the longest "##"-prefixed entry that starts the rest, and so
// on; a word with a part no entry starts, or longer than
// max_input_chars_per_word characters, is the one unknown token.
#pragma once
#include "engine/tokenizers/model.h"
#include "engine/tokenizers/vocabulary.h"

namespace accel::tokenizers {

class WordPieceModel : public Model {
 public:
  explicit WordPieceModel(const JsonNode& node);

  void tokenize(Piece& piece, std::vector<int32_t>& ids) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override { return vocab_.id(token); }
  const std::string* id_to_token(int64_t id) const override { return vocab_.token(id); }
  std::size_t vocab_size() const override { return vocab_.size(); }

 private:
  int32_t unknown_id() const;

  Vocabulary vocab_;
  std::string unk_token_;
  std::string continuing_subword_prefix_;
  uint64_t max_input_chars_per_word_;
  std::string source_;
};

}  // namespace accel::tokenizers
