// Feeds the input to the tokenizer.json reader as a whole file
// (parse_tokenizer_json), and a tokenizer it accepts to encode (texts of
// several scripts and its own special-looking tokens, alone, as pairs, cut
// and padded) and decode of the ids encoding gave.
// Finding: anything but a TokenizerError escaping, a crash, a sanitizer
// report, a hang or a leak; also an encoding whose ids and segments differ
// in number, or a batch that is not rectangular.
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/tokenizers/batch.h"
#include "engine/tokenizers/tokenizer_error.h"
#include "engine/tokenizers/tokenizer_json.h"

namespace tk = accel::tokenizers;

namespace {

const char* const kTexts[] = {"", " ", "Hello, World! don't", "  a\tb\n\nc  ", "café naïve e\u0301", "東京 日本語",
                              "\U0001F468\u200d\U0001F469 🙂", "مرحبا 123", "<s>x</s> [CLS] <|endoftext|> <mask>",
                              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};

void check(const tk::Encoding& e) {
  if (e.ids.size() != e.type_ids.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tk::TokenizerFile file;
  try {
    file = tk::parse_tokenizer_json(std::string(reinterpret_cast<const char*>(data), size), "tokenizer.json");
  } catch (const tk::TokenizerError&) {
    return 0;
  }
  const tk::Tokenizer& t = *file.tokenizer;
  std::vector<tk::Encoding> batch;
  for (const char* text : kTexts) {
    try {
      const tk::Encoding e = t.encode(text, nullptr, true, nullptr);
      check(e);
      batch.push_back(e);
      try {
        t.decode(std::vector<int64_t>(e.ids.begin(), e.ids.end()), false);
        t.decode(std::vector<int64_t>(e.ids.begin(), e.ids.end()), true);
      } catch (const tk::TokenizerError&) {
        // a template's special token the vocabulary lacks
      }
      const std::string_view pair = "second text";
      tk::Truncation cut;
      cut.max_length = 6;
      check(t.encode(text, &pair, true, &cut));
    } catch (const tk::TokenizerError&) {
      // an unknown token the vocabulary lacks, a pattern that gave up, no room for special tokens
    }
  }
  tk::Padding padding;
  const tk::Batch b = tk::make_batch(batch, &padding);
  if (b.input_ids.size() != b.rows * b.columns || b.attention_mask.size() != b.input_ids.size()) std::abort();
  return 0;
}
