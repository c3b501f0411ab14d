// One SentencePiece model (a tokenizer.model), run by Debian's
// libsentencepiece through libaccel_sentencepiece.so.
//
// Why a module opened at run time: Debian's libsentencepiece carries its
// own copy of protobuf (3.14) and exports its symbols, while LibTorch
// loads Debian's libprotobuf (3.21). In one symbol scope the model's
// protobuf code binds to the other version, whose version check aborts
// the process when the library loads. The module is opened on the first
// tokenizer.model read, with RTLD_DEEPBIND, so that it and
// libsentencepiece bind to their own protobuf first. AddressSanitizer
// refuses RTLD_DEEPBIND, so a sanitizer build reports SentencePiece as
// unavailable rather than load it; so does a build whose module is missing.
// (A process that replaces malloc through LD_PRELOAD should not read a
// tokenizer.model: the module's own references bind to glibc's.)
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace accel::tokenizers {

enum class PieceKind { Normal, Unknown, Control, Unused, Byte };

class SentencePieceModel {
 public:
  // The model serialized in `data`, read from `source` (named in errors).
  SentencePieceModel(const std::string& data, const std::string& source);
  ~SentencePieceModel();
  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;  // ids checked by the caller
  int32_t piece_count() const { return piece_count_; }
  std::string piece(int32_t id) const;
  PieceKind kind(int32_t id) const;
  int32_t piece_to_id(std::string_view piece) const;  // -1 when absent
  int32_t unk_id() const;
  int32_t bos_id() const;
  int32_t eos_id() const;
  int32_t pad_id() const;

 private:
  void* processor_;
  int32_t piece_count_;
  std::string source_;
};

// Whether this build can read tokenizer.model files; `why` says why not.
bool sentencepiece_available(std::string* why);

}  // namespace accel::tokenizers
