#include "engine/tokenizers/wordpiece_model.h"

#include "engine/tokenizers/tokenizer_error.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {

WordPieceModel::WordPieceModel(const JsonNode& node)
    : vocab_(Vocabulary::from_json(node.at("vocab"))),
      unk_token_(node.string_or("unk_token", "[UNK]")),
      continuing_subword_prefix_(node.string_or("continuing_subword_prefix", "##")),
      max_input_chars_per_word_(node.unsigned_or("max_input_chars_per_word", 100, UINT32_MAX)),
      source_(node.where()) {}

int32_t WordPieceModel::unknown_id() const {
  const auto id = vocab_.id(unk_token_);
  if (!id) throw TokenizerError(source_ + ": the unk_token '" + unk_token_ + "' is not in the vocabulary");
  return *id;
}

void WordPieceModel::tokenize(Piece& piece, std::vector<int32_t>& ids) const {
  map_pending_bytes(piece);
  const std::string& word = piece.text;
  uint64_t chars = 0;
  for (std::size_t i = 0; i < word.size(); i += utf8::char_length(static_cast<unsigned char>(word[i]))) ++chars;
  if (chars > max_input_chars_per_word_) {
    ids.push_back(unknown_id());
    return;
  }
  const std::size_t first = ids.size();
  std::string candidate;
  std::size_t start = 0;
  while (start < word.size()) {
    std::size_t end = word.size();
    std::optional<int32_t> found;
    while (start < end) {
      candidate.clear();
      if (start > 0) candidate += continuing_subword_prefix_;
      candidate.append(word, start, end - start);
      found = vocab_.id(candidate);
      if (found) break;
      // Back off one character.
      do {
        --end;
      } while (end > start && utf8::is_continuation(word, end));
    }
    if (!found) {
      ids.resize(first);
      ids.push_back(unknown_id());
      return;
    }
    ids.push_back(*found);
    start = end;
  }
}

}  // namespace accel::tokenizers
