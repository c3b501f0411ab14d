// A tokenizer.model alone: SentencePiece's own model and normalization
// (sentencepiece_library.h), with what transformers' SentencePiece
// tokenizers (LlamaTokenizer) add around it:
//  - the special tokens (the model's control and unknown pieces, and those
//    the folder's config names) are found in the text first and given their
//    ids; SentencePiece encodes each stretch between them on its own;
//  - with add_special_tokens, BOS before and EOS after each text, as
//    add_bos_token and add_eos_token say (LlamaTokenizer's defaults: BOS
//    only); a pair's second text and its tokens are segment 1;
//  - decoding gives runs of ordinary ids to SentencePiece and shows a
//    special token as its piece, or leaves it out with skip_special_tokens.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizers/sentencepiece_library.h"
#include "engine/tokenizers/tokenizer.h"

namespace accel::tokenizers {

struct SentencePieceOptions {
  bool add_bos_token = true;
  bool add_eos_token = false;
  std::vector<std::string> special_tokens;  // more contents to find in the text
};

class SentencePieceTokenizer : public Tokenizer {
 public:
  SentencePieceTokenizer(const std::string& path, const SentencePieceOptions& options);

  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int64_t id) const override;
  std::size_t vocab_size(bool) const override { return static_cast<std::size_t>(model_.piece_count()); }
  std::vector<AddedToken> added_tokens() const override { return specials_.tokens(); }
  std::size_t special_tokens_added(bool pair) const override {
    return (bos_.size() + eos_.size()) * (pair ? 2 : 1);
  }
  // The pieces the model itself names unknown, BOS, EOS and padding (empty when it has none).
  std::string unk_piece() const { return special_piece(model_.unk_id()); }
  std::string bos_piece() const { return special_piece(model_.bos_id()); }
  std::string eos_piece() const { return special_piece(model_.eos_id()); }
  std::string pad_piece() const { return special_piece(model_.pad_id()); }

 protected:
  std::vector<int32_t> encode_text(std::string_view text) const override;
  Encoding finish(Encoding first, Encoding* pair, bool add) const override;

 private:
  bool is_special(int64_t id) const;
  std::string special_piece(int32_t id) const {
    return id >= 0 && id < model_.piece_count() ? model_.piece(id) : std::string();
  }

  SentencePieceModel model_;
  AddedVocabulary specials_;
  std::vector<int32_t> bos_, eos_;  // empty when not added
};

}  // namespace accel::tokenizers
