// Feeds the input to the check of a tokenizer.model's character maps
// (check_sentencepiece_charsmaps) twice: as a whole model, and as the
// normalizer's precompiled_charsmap of a model made around it, so that the
// fuzzer reaches the trie walk without first finding the protobuf framing.
// Finding: anything but a TokenizerError escaping, a crash, a sanitizer
// report (a read outside the input), a hang or a leak.
#include <string>

#include "engine/tokenizers/sentencepiece_charsmap.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace tk = accel::tokenizers;

namespace {

std::string varint(uint64_t n) {
  std::string out;
  do {
    const auto byte = static_cast<unsigned char>(n & 0x7F);
    n >>= 7;
    out += static_cast<char>(n ? byte | 0x80 : byte);
  } while (n);
  return out;
}

// A length-delimited protobuf field.
std::string field(uint32_t number, const std::string& bytes) { return varint(number << 3 | 2) + varint(bytes.size()) + bytes; }

void check(const std::string& model) {
  try {
    tk::check_sentencepiece_charsmaps(model, "tokenizer.model");
  } catch (const tk::TokenizerError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check(input);
  check(field(3, field(2, input)));
  return 0;
}
