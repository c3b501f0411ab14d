#include "engine/tokenizers/pipeline_tokenizer.h"

#include "engine/tokenizers/growth_bound.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {

PipelineTokenizer::PipelineTokenizer(Pipeline pipeline) : pipeline_(std::move(pipeline)) {
  const Model& model = *pipeline_.model;
  added_.add(
      std::move(pipeline_.added_tokens), [&model](std::string_view content) { return model.token_to_id(content); },
      model.vocab_size(), [this](std::string& text) { normalize(text); });
}

void PipelineTokenizer::normalize(std::string& text) const {
  const std::size_t input = text.size();
  for (const auto& n : pipeline_.normalizers) {
    n->normalize(text);
    check_growth(n->where + ", with the normalizers before it,", input, text.size());
  }
}

void PipelineTokenizer::tokenize_piece(std::size_t step, Piece&& piece, std::vector<int32_t>& ids) const {
  if (piece.text.empty()) return;
  if (step == pipeline_.pre_tokenizers.size()) {
    pipeline_.model->tokenize(piece, ids);
    return;
  }
  pipeline_.pre_tokenizers[step]->split(std::move(piece),
                                         [&](Piece&& part) { tokenize_piece(step + 1, std::move(part), ids); });
}

std::vector<int32_t> PipelineTokenizer::encode_text(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  const auto add_token = [&ids](int32_t id) { ids.push_back(id); };
  added_.split(
      text, false,
      [&](std::string_view raw, std::size_t offset) {
        std::string normalized(raw);
        normalize(normalized);
        const bool at_start = offset == 0;
        added_.split(
            normalized, true,
            [&](std::string_view stretch, std::size_t at) {
              tokenize_piece(0, Piece{std::string(stretch), at_start && at == 0, false}, ids);
            },
            add_token);
      },
      add_token);
  return ids;
}

std::string PipelineTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (const int64_t id : ids) {
    const std::string* token = added_.decoding_form(id);
    if (!token) token = pipeline_.model->id_to_token(id);
    if (!token) {
      throw TokenizerError("id " + std::to_string(id) + " is not in the vocabulary (" +
                           std::to_string(vocab_size(true)) + " tokens; ids are 0-based)");
    }
    if (skip_special_tokens && added_.is_special(*token)) continue;
    tokens.push_back(*token);
  }
  if (!pipeline_.has_decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  const auto total = [&tokens] {
    std::size_t bytes = 0;
    for (const std::string& t : tokens) bytes += t.size();
    return bytes;
  };
  const std::size_t input = total();
  for (const auto& d : pipeline_.decoders) {
    d->decode_chain(tokens);
    check_growth(d->where + ", with the decoders before it,", input, total());
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<int32_t> PipelineTokenizer::token_to_id(std::string_view token) const {
  if (const auto id = added_.id(token)) return id;
  return pipeline_.model->token_to_id(token);
}

std::optional<std::string> PipelineTokenizer::id_to_token(int64_t id) const {
  if (const std::string* token = added_.decoding_form(id)) return *token;
  if (const std::string* token = pipeline_.model->id_to_token(id)) return *token;
  return std::nullopt;
}

std::size_t PipelineTokenizer::vocab_size(bool with_added_tokens) const {
  const std::size_t base = pipeline_.model->vocab_size();
  if (!with_added_tokens) return base;
  std::size_t extra = 0;
  for (const AddedToken& t : added_.tokens()) {
    if (!pipeline_.model->token_to_id(t.content)) ++extra;
  }
  return base + extra;
}

}  // namespace accel::tokenizers
