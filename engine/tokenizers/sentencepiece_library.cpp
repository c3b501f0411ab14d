#include "engine/tokenizers/sentencepiece_library.h"

#include <dlfcn.h>

#include <type_traits>

#include "engine/tokenizers/sentencepiece_charsmap.h"
#include "engine/tokenizers/sentencepiece_module/sentencepiece_module.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif
#else
constexpr bool kSanitizerBuild = false;
#endif

struct Module {
  std::string error;  // why it is not loaded; empty once loaded
  decltype(&accel_spm_load) load = nullptr;
  decltype(&accel_spm_free) free = nullptr;
  decltype(&accel_spm_encode) encode = nullptr;
  decltype(&accel_spm_decode) decode = nullptr;
  decltype(&accel_spm_piece_count) piece_count = nullptr;
  decltype(&accel_spm_piece) piece = nullptr;
  decltype(&accel_spm_piece_kind) piece_kind = nullptr;
  decltype(&accel_spm_piece_to_id) piece_to_id = nullptr;
  decltype(&accel_spm_special_id) special_id = nullptr;

  Module() {
    if (kSanitizerBuild) {
      error = "SentencePiece is unavailable in a sanitizer build (AddressSanitizer refuses RTLD_DEEPBIND)";
      return;
    }
    void* handle = dlopen(ACCEL_SENTENCEPIECE_MODULE, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      error = std::string("SentencePiece is unavailable: ") + dlerror();
      return;
    }
    const auto find = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(handle, name));
      if (!fn && error.empty()) error = std::string("SentencePiece is unavailable: ") + ACCEL_SENTENCEPIECE_MODULE +
                                        " has no " + name;
    };
    find(load, "accel_spm_load");
    find(free, "accel_spm_free");
    find(encode, "accel_spm_encode");
    find(decode, "accel_spm_decode");
    find(piece_count, "accel_spm_piece_count");
    find(piece, "accel_spm_piece");
    find(piece_kind, "accel_spm_piece_kind");
    find(piece_to_id, "accel_spm_piece_to_id");
    find(special_id, "accel_spm_special_id");
  }
};

const Module& module() {
  static const Module m;  // opened once, on first use, and kept
  return m;
}

const Module& loaded_module() {
  const Module& m = module();
  if (!m.error.empty()) throw TokenizerError(m.error);
  return m;
}

void append_ids(void* context, const int* ids, size_t count) {
  static_cast<std::vector<int32_t>*>(context)->assign(ids, ids + count);
}
void append_text(void* context, const char* text, size_t size) { static_cast<std::string*>(context)->assign(text, size); }

}  // namespace

bool sentencepiece_available(std::string* why) {
  const Module& m = module();
  if (why) *why = m.error;
  return m.error.empty();
}

SentencePieceModel::SentencePieceModel(const std::string& data, const std::string& source) : source_(source) {
  const Module& m = loaded_module();
  check_sentencepiece_charsmaps(data, source);
  char error[512] = {0};
  processor_ = m.load(data.data(), data.size(), error, sizeof error);
  if (!processor_) throw TokenizerError("'" + source + "' is not a SentencePiece model: " + error);
  piece_count_ = m.piece_count(processor_);
}

SentencePieceModel::~SentencePieceModel() { module().free(processor_); }

std::vector<int32_t> SentencePieceModel::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  char error[512] = {0};
  if (module().encode(processor_, text.data(), text.size(), append_ids, &ids, error, sizeof error) != 0) {
    throw TokenizerError("'" + source_ + "': SentencePiece could not encode the text: " + error);
  }
  return ids;
}

std::string SentencePieceModel::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  char error[512] = {0};
  if (module().decode(processor_, ids.data(), ids.size(), append_text, &text, error, sizeof error) != 0) {
    throw TokenizerError("'" + source_ + "': SentencePiece could not decode the ids: " + error);
  }
  return text;
}

std::string SentencePieceModel::piece(int32_t id) const {
  std::string text;
  module().piece(processor_, id, append_text, &text);
  return text;
}

PieceKind SentencePieceModel::kind(int32_t id) const {
  return static_cast<PieceKind>(module().piece_kind(processor_, id));
}

int32_t SentencePieceModel::piece_to_id(std::string_view piece) const {
  return module().piece_to_id(processor_, piece.data(), piece.size());
}

int32_t SentencePieceModel::unk_id() const { return module().special_id(processor_, 0); }
int32_t SentencePieceModel::bos_id() const { return module().special_id(processor_, 1); }
int32_t SentencePieceModel::eos_id() const { return module().special_id(processor_, 2); }
int32_t SentencePieceModel::pad_id() const { return module().special_id(processor_, 3); }

}  // namespace accel::tokenizers
