// Feeds the input as text to the committed fixture tokenizers
// (tests/tokenizers/fixtures: byte-level BPE, byte-fallback BPE, WordPiece).
// The first byte picks the tokenizer, whether special tokens are added and
// a truncation length; the rest is the text, encoded alone and as a pair,
// then decoded.
// Finding: for valid UTF-8, any exception at all (encoding a text never
// fails), an id outside the vocabulary, decode failing on encode's ids, or
// byte-level BPE's plain ids not decoding to the text itself (it is
// lossless, unless the lstrip <mask> took spaces); for other bytes,
// anything but the TokenizerError that names the bad byte. And a crash,
// sanitizer report, hang or leak.
#include <cstdlib>
#include <memory>
#include <string>

#include "engine/tokenizers/tokenizer_error.h"
#include "engine/tokenizers/tokenizer_json.h"
#include "engine/utf8/utf8.h"

namespace tk = accel::tokenizers;
namespace utf8 = accel::utf8;

namespace {

const char* const kNames[] = {"byte_level", "byte_fallback", "wordpiece"};

const tk::Tokenizer& fixture(int which) {
  static const std::unique_ptr<tk::PipelineTokenizer> loaded[3] = {
      tk::read_tokenizer_json(std::string(ACCEL_TOKENIZER_FIXTURES) + "/" + kNames[0] + "/tokenizer.json").tokenizer,
      tk::read_tokenizer_json(std::string(ACCEL_TOKENIZER_FIXTURES) + "/" + kNames[1] + "/tokenizer.json").tokenizer,
      tk::read_tokenizer_json(std::string(ACCEL_TOKENIZER_FIXTURES) + "/" + kNames[2] + "/tokenizer.json").tokenizer};
  return *loaded[which];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int which = data[0] % 3;
  const bool special = (data[0] / 3) % 2 == 1;
  const std::size_t cut_length = (data[0] / 6) % 8;  // 0: no truncation
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const tk::Tokenizer& t = fixture(which);
  if (utf8::first_invalid(text) != std::string::npos) {
    try {
      t.encode(text, nullptr, special, nullptr);
    } catch (const tk::TokenizerError&) {
      return 0;
    }
    std::abort();  // bad UTF-8 must be refused
  }
  tk::Truncation cut;
  cut.max_length = cut_length + 3;  // room for the templates' special tokens
  const tk::Encoding e = t.encode(text, nullptr, special, cut_length ? &cut : nullptr);
  const std::string_view pair = text;
  const tk::Encoding p = t.encode(text, &pair, special, cut_length ? &cut : nullptr);
  if (cut_length && (e.ids.size() > cut.max_length || p.ids.size() > cut.max_length)) std::abort();
  const std::size_t vocab = t.vocab_size(true);
  for (const int32_t id : e.ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= vocab) std::abort();
  }
  const std::string decoded = t.decode(std::vector<int64_t>(e.ids.begin(), e.ids.end()), false);
  t.decode(std::vector<int64_t>(p.ids.begin(), p.ids.end()), true);
  if (which == 0 && !special && !cut_length && text.find("<mask>") == std::string::npos && decoded != text) {
    std::abort();
  }
  return 0;
}
