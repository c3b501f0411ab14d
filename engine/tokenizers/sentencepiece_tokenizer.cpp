#include "engine/tokenizers/sentencepiece_tokenizer.h"

#include "engine/tokenizers/tokenizer_error.h"
#include "engine/files/outside_file.h"

namespace accel::tokenizers {
namespace {

// Larger than any released tokenizer.model (Llama's is 500 KiB, the largest a few MiB).
constexpr uint64_t kMaxModelBytes = uint64_t{256} << 20;

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const std::string& path, const SentencePieceOptions& options)
    : model_(read_outside_file(path, kMaxModelBytes), path) {
  std::vector<AddedToken> specials;
  for (int32_t id = 0; id < model_.piece_count(); ++id) {
    const PieceKind kind = model_.kind(id);
    if (kind == PieceKind::Control || kind == PieceKind::Unknown) {
      specials.push_back({model_.piece(id), id, true, false, false, false, false});
    }
  }
  for (const std::string& content : options.special_tokens) {
    check_utf8(content, "the special token '" + content + "'");
    specials.push_back({content, -1, true, false, false, false, false});
  }
  const auto piece_id = [this](std::string_view content) -> std::optional<int32_t> {
    const int32_t id = model_.piece_to_id(content);
    if (id < 0) return std::nullopt;
    return id;
  };
  for (const AddedToken& t : specials) {
    if (!piece_id(t.content)) {
      throw TokenizerError("'" + path + "' has no piece '" + t.content + "', which the config names a special token");
    }
  }
  specials_.add(std::move(specials), piece_id, static_cast<std::size_t>(model_.piece_count()), [](std::string&) {});
  if (options.add_bos_token && model_.bos_id() >= 0) bos_.push_back(model_.bos_id());
  if (options.add_eos_token && model_.eos_id() >= 0) eos_.push_back(model_.eos_id());
}

std::vector<int32_t> SentencePieceTokenizer::encode_text(std::string_view text) const {
  std::vector<int32_t> ids;
  specials_.split(
      text, false,
      [&](std::string_view stretch, std::size_t) {
        const std::vector<int32_t> part = model_.encode(stretch);
        ids.insert(ids.end(), part.begin(), part.end());
      },
      [&](int32_t id) { ids.push_back(id); });
  return ids;
}

Encoding SentencePieceTokenizer::finish(Encoding first, Encoding* pair, bool add) const {
  Encoding out;
  const auto add_part = [&](Encoding& part, int32_t segment) {
    Encoding e;
    if (add) e.ids = bos_;
    e.ids.insert(e.ids.end(), part.ids.begin(), part.ids.end());
    if (add) e.ids.insert(e.ids.end(), eos_.begin(), eos_.end());
    e.type_ids.assign(e.ids.size(), segment);
    out.append(e);
  };
  add_part(first, 0);
  if (pair) add_part(*pair, 1);
  return out;
}

bool SentencePieceTokenizer::is_special(int64_t id) const {
  const std::string* form = specials_.decoding_form(id);
  return form != nullptr;
}

std::string SentencePieceTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string out;
  std::vector<int32_t> run;
  const auto flush = [&] {
    if (run.empty()) return;
    out += model_.decode(run);
    run.clear();
  };
  for (const int64_t id : ids) {
    if (id < 0 || id >= model_.piece_count()) {
      throw TokenizerError("id " + std::to_string(id) + " is not in the vocabulary (" +
                           std::to_string(model_.piece_count()) + " pieces; ids are 0-based)");
    }
    if (!is_special(id)) {
      run.push_back(static_cast<int32_t>(id));
    } else if (!skip_special_tokens) {
      flush();
      out += *specials_.decoding_form(id);
    }
  }
  flush();
  return out;
}

std::optional<int32_t> SentencePieceTokenizer::token_to_id(std::string_view token) const {
  const int32_t id = model_.piece_to_id(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::optional<std::string> SentencePieceTokenizer::id_to_token(int64_t id) const {
  if (id < 0 || id >= model_.piece_count()) return std::nullopt;
  return model_.piece(static_cast<int32_t>(id));
}

}  // namespace accel::tokenizers
