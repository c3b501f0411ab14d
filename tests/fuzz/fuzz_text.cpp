// Feeds the input to the text data set's path (TextDataset): read_file_text
// on it as a data file (plain, or gzip by its magic bytes), then a character
// vocabulary built from the text and the text encoded with it and with the
// byte vocabulary.
// Finding: anything but a std::runtime_error escaping, a crash, a sanitizer
// report, a hang or a leak; also an encoding that does not decode back to
// the text, or an id outside the vocabulary.
#include <cstdlib>

#include "engine/data/file_text.h"
#include "engine/data/vocabulary.h"
#include "tests/fuzz/scratch_file.h"

namespace {

void round_trip(const accel::data::Vocabulary& vocab, const std::string& text) {
  const at::Tensor ids = vocab.encode(text, "text.txt");
  if (ids.numel() > 0 && (ids.min().item<int64_t>() < 1 || ids.max().item<int64_t>() > vocab.size())) std::abort();
  if (vocab.decode(ids) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace accel::data;
  const std::string path = accel::fuzz::write_scratch("text.txt", data, size);
  std::string text;
  try {
    text = read_file_text(path);
  } catch (const std::runtime_error&) {
    return 0;  // a corrupt gzip stream or one that expands too far
  }
  round_trip(Vocabulary::bytes(), text);  // any text encodes at byte level
  try {
    const Vocabulary chars = Vocabulary::chars_of(text, "text.txt");
    round_trip(chars, text);  // what built the vocabulary must encode with it
  } catch (const std::runtime_error&) {
    // invalid UTF-8
  }
  return 0;
}
