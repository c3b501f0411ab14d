// A tokenizer.json tokenizer: the reference's pipeline, stage by stage.
// Encoding one text:
//  1. added tokens that are not normalized are cut out of the raw text;
//  2. each stretch between them is normalized, and the normalized added
//     tokens are cut out of it;
//  3. each remaining stretch is pre-tokenized into words, and each word is
//     tokenized by the model;
// then (Tokenizer::encode) truncation and the post-processor's special
// tokens. Decoding maps ids to tokens (an added token in the form decoding
// shows, added_vocabulary.h) and runs the decoder, or joins the tokens
// with spaces when there is none, as the reference does.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizers/added_vocabulary.h"
#include "engine/tokenizers/decoders.h"
#include "engine/tokenizers/model.h"
#include "engine/tokenizers/normalizers.h"
#include "engine/tokenizers/post_processors.h"
#include "engine/tokenizers/pre_tokenizers.h"
#include "engine/tokenizers/tokenizer.h"

namespace accel::tokenizers {

struct Pipeline {
  std::vector<std::unique_ptr<Normalizer>> normalizers;
  std::vector<std::unique_ptr<PreTokenizer>> pre_tokenizers;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;  // may be null
  std::vector<std::unique_ptr<Decoder>> decoders;
  bool has_decoder = false;
  std::vector<AddedToken> added_tokens;  // in the file's order
};

class PipelineTokenizer : public Tokenizer {
 public:
  explicit PipelineTokenizer(Pipeline pipeline);

  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override;
  std::optional<std::string> id_to_token(int64_t id) const override;
  std::size_t vocab_size(bool with_added_tokens) const override;
  std::vector<AddedToken> added_tokens() const override { return added_.tokens(); }
  std::size_t special_tokens_added(bool pair) const override {
    return pipeline_.post_processor ? pipeline_.post_processor->added_tokens(pair) : 0;
  }

 protected:
  std::vector<int32_t> encode_text(std::string_view text) const override;
  Encoding finish(Encoding first, Encoding* pair, bool add) const override {
    return post_process(pipeline_.post_processor.get(), std::move(first), pair, add);
  }

 private:
  void normalize(std::string& text) const;
  // Pre-tokenizer `step` on, then the model, for one piece.
  void tokenize_piece(std::size_t step, Piece&& piece, std::vector<int32_t>& ids) const;

  Pipeline pipeline_;
  AddedVocabulary added_;
};

}  // namespace accel::tokenizers
