// The tokenizers engine alone: the committed fixtures give the ids Hugging
// Face tokenizers and sentencepiece gave (tests/tokenizers/make_fixtures.py
// wrote both), and each stage's rules on small files written here: the
// Oniguruma semantics of patterns, BPE merge order, byte fallback and
// unknown tokens, added tokens (single_word, lstrip, rstrip, normalized),
// truncation and padding, lossy UTF-8, and bad input refused with the file,
// key, byte or id named.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "engine/tokenizers/batch.h"
#include "engine/tokenizers/regex.h"
#include "engine/tokenizers/sentencepiece_charsmap.h"
#include "engine/tokenizers/sentencepiece_tokenizer.h"
#include "engine/tokenizers/text_records.h"
#include "engine/tokenizers/tokenizer_error.h"
#include "engine/tokenizers/tokenizer_json.h"

namespace tk = accel::tokenizers;

namespace {

const std::string kFixtures = std::string(ACCEL_TEST_DIR) + "/tokenizers/fixtures";

std::vector<int32_t> ids_of(const tk::Tokenizer& t, const std::string& text, bool special = true) {
  return t.encode(text, nullptr, special, nullptr).ids;
}

std::vector<int64_t> wide(const std::vector<int32_t>& ids) { return {ids.begin(), ids.end()}; }

// A tokenizer.json from its parts (JSON text each), with a vocabulary of
// `vocab` and these merges.
std::unique_ptr<tk::PipelineTokenizer> tokenizer(const std::string& model, const std::string& extra = "") {
  const std::string text = "{\"version\": \"1.0\", \"model\": " + model + (extra.empty() ? "" : ", " + extra) + "}";
  return tk::parse_tokenizer_json(text, "test.json").tokenizer;
}

const char* kAbc =
    R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "<unk>": 6, " ": 7},
        "merges": ["b c", "a b", "a bc"], "unk_token": "<unk>"})";

std::vector<std::string> split(const tk::Regex& re, const std::string& text) {
  std::vector<tk::Span> spans;
  re.find_matches(text, spans);
  std::vector<std::string> out;
  for (const tk::Span& s : spans) out.push_back((s.match ? "+" : "-") + text.substr(s.start, s.end - s.start));
  return out;
}

}  // namespace

TEST_CASE("the fixtures give the reference's ids and text", "[tokenizers]") {
  std::ifstream in(kFixtures + "/expected.json");
  REQUIRE(in);
  const nlohmann::json expected = nlohmann::json::parse(in);
  for (const char* name : {"byte_level", "byte_fallback", "wordpiece", "sentencepiece"}) {
    std::unique_ptr<tk::Tokenizer> t;
    if (std::string(name) == "sentencepiece") {
      std::string why;
      if (!tk::sentencepiece_available(&why)) {
        WARN("not checked: " << why);
        continue;
      }
      t = std::make_unique<tk::SentencePieceTokenizer>(kFixtures + "/sentencepiece/tokenizer.model",
                                                       tk::SentencePieceOptions{});
    } else {
      t = tk::read_tokenizer_json(kFixtures + "/" + name + "/tokenizer.json").tokenizer;
    }
    for (const auto& c : expected[name]) {
      const std::string text = c["text"].get<std::string>();
      INFO(name << ": " << text);
      CHECK(ids_of(*t, text) == c["ids"].get<std::vector<int32_t>>());
      CHECK(ids_of(*t, text, false) == c["plain"].get<std::vector<int32_t>>());
      CHECK(t->decode(c["ids"].get<std::vector<int64_t>>(), false) == c["decoded"].get<std::string>());
    }
  }
}

TEST_CASE("patterns split text as Oniguruma's find_iter does", "[tokenizers]") {
  // Empty matches: each once, and not right after a match.
  CHECK(split(tk::Regex::compile("a*", "t"), "baab") == std::vector<std::string>{"+", "-b", "+aa", "-b", "+"});
  CHECK(split(tk::Regex::compile("x?", "t"), "ab") == std::vector<std::string>{"+", "-a", "+", "-b", "+"});
  CHECK(split(tk::Regex::compile("a", "t"), "") == std::vector<std::string>{"-"});
  // \s is Unicode's White_Space: U+0085 yes, U+180E (no longer a space) no.
  CHECK(split(tk::Regex::compile("\\s", "t"), "a\u0085b\u180Ec") ==
        std::vector<std::string>{"-a", "+\u0085", "-b\u180Ec"});
  CHECK(split(tk::Regex::compile("[^\\s]+", "t"), "a\u0085b") == std::vector<std::string>{"+a", "-\u0085", "+b"});
  // \p{L} knows Unicode 15.0's letters (CJK extension H), as Oniguruma does.
  CHECK(split(tk::Regex::compile("\\p{L}+", "t"), "1\U00031350x2") ==
        std::vector<std::string>{"-1", "+\U00031350x", "-2"});
  // Ruby's \h is a hex digit; (?i:) folds Unicode (ſ is s).
  CHECK(split(tk::Regex::compile("\\h+", "t"), "xF0z") == std::vector<std::string>{"-x", "+F0", "-z"});
  CHECK(split(tk::Regex::compile("(?i:'s)", "t"), "it'ſ") == std::vector<std::string>{"-it", "+'ſ"});
  // Literal patterns are literal.
  CHECK(split(tk::Regex::literal("a.b", "t"), "a.bxaxb") == std::vector<std::string>{"+a.b", "-xaxb"});
  CHECK_THROWS_WITH(tk::Regex::compile("[a[b]]", "'f': pattern"), Catch::Contains("'f': pattern") &&
                                                                      Catch::Contains("nests character classes"));
  CHECK_THROWS_WITH(tk::Regex::compile("[a-z&&[^c]]", "w"), Catch::Contains("intersects"));
  CHECK_THROWS_WITH(tk::Regex::compile("(", "'f': pattern"),
                    Catch::Contains("'f': pattern") && Catch::Contains("does not compile"));
}

TEST_CASE("a pattern that backtracks without end fails instead of hanging", "[tokenizers]") {
  const tk::Regex re = tk::Regex::compile("(a+)+$", "'f': pattern");
  std::vector<tk::Span> spans;
  CHECK_THROWS_WITH(re.find_matches(std::string(5000, 'a') + "b", spans),
                    Catch::Contains("'f': pattern") && Catch::Contains("failed"));
}

TEST_CASE("BPE merges the lowest rank first, the leftmost of equals", "[tokenizers]") {
  auto t = tokenizer(kAbc);
  CHECK(ids_of(*t, "abc") == std::vector<int32_t>{5});         // "b c" (rank 0) first, then "a bc"
  CHECK(ids_of(*t, "abbc") == std::vector<int32_t>{3, 4});     // "b c" first, then "a b"
  CHECK(ids_of(*t, "ab") == std::vector<int32_t>{3});
  CHECK(ids_of(*t, "abab") == std::vector<int32_t>{3, 3});
  CHECK(ids_of(*t, "axb") == std::vector<int32_t>{0, 6, 1});   // x is unknown
  CHECK(t->decode({0, 4}, false) == "a bc");                    // no decoder: tokens joined by spaces
  // Repeated words come from the cache with the same ids.
  for (int i = 0; i < 3; ++i) CHECK(ids_of(*t, "abbc") == std::vector<int32_t>{3, 4});
}

TEST_CASE("BPE options: fuse_unk, byte_fallback, ignore_merges, prefixes", "[tokenizers]") {
  auto fused = tokenizer(R"({"type": "BPE", "vocab": {"a": 0, "<unk>": 1}, "merges": [], "unk_token": "<unk>",
                             "fuse_unk": true})");
  CHECK(ids_of(*fused, "axyza") == std::vector<int32_t>{0, 1, 0});
  auto unfused = tokenizer(R"({"type": "BPE", "vocab": {"a": 0, "<unk>": 1}, "merges": [], "unk_token": "<unk>"})");
  CHECK(ids_of(*unfused, "axya") == std::vector<int32_t>{0, 1, 1, 0});
  auto dropping = tokenizer(R"({"type": "BPE", "vocab": {"a": 0}, "merges": []})");
  CHECK(ids_of(*dropping, "axa") == std::vector<int32_t>{0, 0});  // no unk_token: dropped, as the reference does

  std::string vocab = R"({"a": 0)";
  for (int b = 0; b < 256; ++b) {
    char name[16];
    std::snprintf(name, sizeof name, ", \"<0x%02X>\": %d", b, b + 1);
    vocab += name;
  }
  vocab += "}";
  auto fallback = tokenizer(R"({"type": "BPE", "merges": [], "byte_fallback": true, "vocab": )" + vocab + "}",
                            R"("decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]})");
  CHECK(ids_of(*fallback, "aé") == std::vector<int32_t>{0, 0xC3 + 1, 0xA9 + 1});
  CHECK(fallback->decode({0, 0xC3 + 1, 0xA9 + 1}, false) == "aé");
  CHECK(fallback->decode({0, 0xC3 + 1}, false) == "a\uFFFD");  // one replacement per byte of a bad run

  const char* words = R"({"type": "BPE", "vocab": {"h": 0, "i": 1, "hi": 2, "x": 3, "hix": 4}, "merges": ["h i"]})";
  CHECK(ids_of(*tokenizer(words), "hix") == std::vector<int32_t>{2, 3});
  std::string ignoring = words;
  ignoring.insert(ignoring.size() - 1, R"(, "ignore_merges": true)");
  CHECK(ids_of(*tokenizer(ignoring), "hix") == std::vector<int32_t>{4});  // a vocabulary word is one token

  auto suffixed = tokenizer(R"({"type": "BPE", "vocab": {"a": 0, "##b": 1, "b</w>": 2, "##b</w>": 3, "a##b": 4,
                                "ab</w>": 5}, "merges": ["a ##b</w>"], "continuing_subword_prefix": "##",
                                "end_of_word_suffix": "</w>"})");
  CHECK(ids_of(*suffixed, "ab") == std::vector<int32_t>{5});
}

TEST_CASE("added tokens: leftmost-longest, single_word, lstrip, rstrip, normalized", "[tokenizers]") {
  const std::string model = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, " ": 2, "<m>": 3}, "merges": []})";
  auto t = tokenizer(model, R"("normalizer": {"type": "Lowercase"}, "added_tokens": [
      {"id": 3, "content": "<m>", "special": true, "lstrip": true, "rstrip": false, "normalized": false, "single_word": false},
      {"id": 4, "content": "<m>>", "special": true, "lstrip": false, "rstrip": true, "normalized": false, "single_word": false},
      {"id": 5, "content": "ab", "special": false, "lstrip": false, "rstrip": false, "normalized": true, "single_word": true},
      {"id": 6, "content": "B", "special": false, "lstrip": false, "rstrip": false, "normalized": false, "single_word": false}])");
  CHECK(ids_of(*t, "a  <m>b") == std::vector<int32_t>{0, 3, 1});    // lstrip takes the spaces
  CHECK(ids_of(*t, "a<m>>  b") == std::vector<int32_t>{0, 4, 1});   // the longest, and rstrip takes the spaces
  CHECK(ids_of(*t, "a ab b") == std::vector<int32_t>{0, 2, 5, 2, 1});  // "ab" alone is one token
  CHECK(ids_of(*t, "aab") == std::vector<int32_t>{0, 0, 1});        // not a single word here
  CHECK(ids_of(*t, "Ab") == std::vector<int32_t>{5});                // normalized: matched after lowercasing
  CHECK(ids_of(*t, "AB") == std::vector<int32_t>{0, 6});             // the raw B is found first
  CHECK(ids_of(*t, "B") == std::vector<int32_t>{6});                 // not normalized: the raw text
  CHECK(t->token_to_id("<m>>") == 4);
  CHECK(t->vocab_size(false) == 4);
  CHECK(t->vocab_size(true) == 7);
  CHECK(t->decode({0, 3, 4, 5, 6}, true) == "a ab B");               // special tokens skipped
}

TEST_CASE("added tokens are found across the matcher's windows of 65,536 positions", "[tokenizers]") {
  const std::string model = R"({"type": "BPE", "vocab": {"a": 0, "<m>": 1, "<m>a": 2}, "merges": []})";
  auto t = tokenizer(model, R"("pre_tokenizer": {"type": "Split", "pattern": {"String": "a"}, "behavior": "Isolated"},
      "added_tokens": [
      {"id": 1, "content": "<m>", "special": true, "normalized": false},
      {"id": 2, "content": "<m>a", "special": true, "normalized": false}])");
  for (const std::size_t before : {65532, 65533, 65534, 65535, 65536, 65537, 131072}) {
    std::vector<int32_t> expected(before, 0);
    expected.push_back(2);  // the longest at its position, across the window's end
    expected.push_back(1);
    CHECK(ids_of(*t, std::string(before, 'a') + "<m>a<m>", false) == expected);
  }
}

TEST_CASE("truncation keeps room for special tokens; padding on either side", "[tokenizers]") {
  auto t = tokenizer(kAbc, R"("post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<unk>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
      "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
      "special_tokens": {"<unk>": {"id": "<unk>", "ids": [6], "tokens": ["<unk>"]}}})");
  tk::Truncation cut;
  cut.max_length = 3;
  CHECK(t->encode("abababab", nullptr, true, &cut).ids == std::vector<int32_t>{6, 3, 3});
  cut.side = tk::Side::Left;
  CHECK(t->encode("ababac", nullptr, true, &cut).ids == std::vector<int32_t>{6, 0, 2});
  const std::string_view pair = "cc";
  cut.side = tk::Side::Right;
  cut.max_length = 3;
  const tk::Encoding e = t->encode("ababab", &pair, true, &cut);
  CHECK(e.ids == std::vector<int32_t>{3, 3, 2});  // the longer text gives way first
  CHECK(e.type_ids == std::vector<int32_t>{0, 0, 1});
  cut.strategy = tk::TruncationStrategy::OnlySecond;
  cut.max_length = 2;
  CHECK_THROWS_WITH(t->encode("ababab", &pair, true, &cut), Catch::Contains("only_second cannot cut"));
  cut.max_length = 0;
  CHECK_THROWS_WITH(t->encode("ab", nullptr, true, &cut), Catch::Contains("leaves no room"));

  std::vector<tk::Encoding> rows = {t->encode("ab", nullptr, true, nullptr), t->encode("abab", nullptr, true, nullptr)};
  tk::Padding pad;
  pad.pad_id = 7;
  pad.side = tk::Side::Left;
  tk::Batch b = tk::make_batch(rows, &pad);
  CHECK(b.columns == 3);
  CHECK(b.input_ids == std::vector<int64_t>{7, 6, 3, 6, 3, 3});
  CHECK(b.attention_mask == std::vector<int64_t>{0, 1, 1, 1, 1, 1});
  pad.side = tk::Side::Right;
  pad.multiple_of = 4;
  b = tk::make_batch(rows, &pad);
  CHECK(b.input_ids == std::vector<int64_t>{6, 3, 7, 7, 6, 3, 3, 7});
  CHECK_THROWS_WITH(tk::make_batch(rows, nullptr), Catch::Contains("pass padding = true"));
  pad.length = 2;
  pad.multiple_of = 0;
  CHECK_THROWS_WITH(tk::make_batch(rows, &pad), Catch::Contains("text 2") && Catch::Contains("truncation"));
}

TEST_CASE("bad files, text and ids are errors that name the file, key, byte or id", "[tokenizers]") {
  CHECK_THROWS_WITH(tokenizer(kAbc, R"("normalizer": {"type": "Sequence", "normalizers": [{"type": "Precompiled"}]})"),
                    Catch::Contains("'test.json': normalizer.normalizers[0].type is 'Precompiled'") &&
                        Catch::Contains("does not support"));
  CHECK_THROWS_WITH(tokenizer(R"({"type": "Unigram", "vocab": []})"),
                    Catch::Contains("model.type is 'Unigram'") && Catch::Contains("BPE and WordPiece"));
  CHECK_THROWS_WITH(tokenizer(R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["a zz"]})"),
                    Catch::Contains("model.merges[0] merges 'zz', which is not in the vocabulary"));
  CHECK_THROWS_WITH(tokenizer(R"({"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []})"),
                    Catch::Contains("model.vocab gives the id 0 to both"));
  CHECK_THROWS_WITH(tokenizer(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1})"),
                    Catch::Contains("model.dropout") && Catch::Contains("not supported"));
  CHECK_THROWS_WITH(tk::parse_tokenizer_json("{\"model\": [1, 2", "broken.json"),
                    Catch::Contains("'broken.json' is not valid JSON"));
  CHECK_THROWS_WITH(tk::read_tokenizer_json("/nonexistent/tokenizer.json"), Catch::Contains("cannot open"));
  auto t = tokenizer(kAbc);
  CHECK_THROWS_WITH(ids_of(*t, "ab\xC3("), Catch::Contains("not valid UTF-8: byte 2 (0-based) is \\xC3"));
  CHECK_THROWS_WITH(t->decode({0, 99}, false), Catch::Contains("id 99 is not in the vocabulary"));
  CHECK_THROWS_WITH(t->decode({-1}, false), Catch::Contains("id -1"));
}

TEST_CASE("data files give one text per record, errors naming the line", "[tokenizers]") {
  const std::string path = "/tmp/accel_tokenizers_records.jsonl";
  std::ofstream(path) << "{\"text\": \"one\"}\n\n{\"text\": \"two\", \"n\": 1}\n{\"other\": 1}\n";
  CHECK_THROWS_WITH(tk::read_text_records(path, tk::RecordFormat::JsonLines, "text"),
                    Catch::Contains("line 4 has no \"text\""));
  std::ofstream(path) << "{\"text\": \"one\"}\n{\"text\": \"two\"}\n";
  CHECK(tk::read_text_records(path, tk::RecordFormat::JsonLines, "text") == std::vector<std::string>{"one", "two"});
  std::ofstream(path) << "{\"text\": \"one\"}\nnot json\n";
  CHECK_THROWS_WITH(tk::read_text_records(path, tk::RecordFormat::JsonLines, "text"),
                    Catch::Contains("line 2 is not valid JSON"));
  std::ofstream(path) << "a line\n\nanother\xFF\n";
  CHECK_THROWS_WITH(tk::read_text_records(path, tk::RecordFormat::Text, ""), Catch::Contains("line 3 is not valid UTF-8"));
  std::remove(path.c_str());
}

TEST_CASE("a tokenizer.model's character map is walked before SentencePiece reads it", "[tokenizers]") {
  // The nmt_nfkc map SentencePiece's trainer writes (240 KB), as a
  // model's normalizer_spec.precompiled_charsmap (fields 3 and 2).
  std::ifstream in(std::string(ACCEL_TEST_DIR) + "/tokenizers/fixtures/nmt_nfkc.charsmap", std::ios::binary);
  REQUIRE(in);
  std::string map((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto field = [](int number, const std::string& bytes) {
    std::string out(1, static_cast<char>(number << 3 | 2));
    for (std::size_t n = bytes.size(); ; n >>= 7) {
      out += static_cast<char>((n & 0x7F) | (n >> 7 ? 0x80 : 0));
      if (!(n >> 7)) break;
    }
    return out + bytes;
  };
  CHECK_NOTHROW(tk::check_sentencepiece_charsmaps(field(3, field(2, map)), "real.model"));
  // The root's offset sent 4 GB past the trie.
  std::string garbage = map;
  garbage[4] = garbage[5] = garbage[6] = garbage[7] = '\xFF';
  CHECK_THROWS_WITH(tk::check_sentencepiece_charsmaps(field(3, field(2, garbage)), "bad.model"),
                    Catch::Contains("'bad.model': normalizer_spec.precompiled_charsmap is not a valid character map") &&
                        Catch::Contains("past the trie"));
  // A trie too small for its root's children, in the denormalizer's map.
  std::string trie_size(4, '\0');
  trie_size[0] = 8;
  const std::string leafless = trie_size + std::string("\x00\x04\x00\x00", 4) + std::string(4, '\0') + "x";
  CHECK_THROWS_WITH(tk::check_sentencepiece_charsmaps(field(5, field(2, leafless)), "short.model"),
                    Catch::Contains("'short.model': denormalizer_spec.precompiled_charsmap"));
  CHECK_THROWS_WITH(tk::check_sentencepiece_charsmaps(std::string("\x1a\x05", 2), "cut.model"),
                    Catch::Contains("'cut.model' is not a SentencePiece model"));
}
