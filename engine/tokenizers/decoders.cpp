#include "engine/tokenizers/decoders.h"

#include "engine/tokenizers/byte_level.h"
#include "engine/tokenizers/growth_bound.h"
#include "engine/tokenizers/regex.h"
#include "engine/tokenizers/split_pattern.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

// Every occurrence of `from` (not empty) in `text` replaced by `to`.
std::string replace_all(const std::string& text, const std::string& from, const std::string& to) {
  std::string out;
  std::size_t start = 0;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, start)) {
    out.append(text, start, at - start);
    out += to;
    start = at + from.size();
  }
  out.append(text, start, std::string::npos);
  return out;
}

class ByteLevel : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& token : tokens) {
      const auto b = byte_level_bytes(token);
      bytes += b ? *b : token;
    }
    tokens.assign(1, utf8::lossy(bytes));
  }
};

// A <0xNN> token's byte, as the reference reads it (Rust's
// u8::from_str_radix over its two characters, which takes a leading '+').
int fallback_byte(const std::string& token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return -1;
  const auto digit = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const char a = token[3], b = token[4];
  if (a == '+') return digit(b);
  if (digit(a) < 0 || digit(b) < 0) return -1;
  return digit(a) * 16 + digit(b);
}

class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    const auto flush = [&] {
      if (bytes.empty()) return;
      if (utf8::first_invalid(bytes) == std::string::npos) {
        out.push_back(bytes);
      } else {
        for (std::size_t i = 0; i < bytes.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
      }
      bytes.clear();
    };
    for (std::string& token : tokens) {
      const int b = fallback_byte(token);
      if (b >= 0) {
        bytes += static_cast<char>(b);
      } else {
        flush();
        out.push_back(std::move(token));
      }
    }
    flush();
    tokens.swap(out);
  }
};

class Metaspace : public Decoder {
 public:
  Metaspace(std::string replacement, bool prepends) : replacement_(std::move(replacement)), prepends_(prepends) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      // The first token loses every replacement character when the
      // pre-tokenizer prepends one, as in the reference.
      tokens[i] = replace_all(tokens[i], replacement_, i == 0 && prepends_ ? "" : " ");
    }
  }

 private:
  std::string replacement_;
  bool prepends_;
};

// transformers' clean_up_tokenization, which WordPiece's cleanup applies to each token.
std::string cleanup(std::string text) {
  static const std::pair<const char*, const char*> rules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},   {" ' ", "'"},  {" n't", "n't"},
      {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : rules) text = replace_all(text, from, to);
  return text;
}

class WordPiece : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i != 0) {
        if (token.compare(0, prefix_.size(), prefix_) == 0) {
          token.erase(0, prefix_.size());
        } else {
          token.insert(0, " ");
        }
      }
      if (cleanup_) token = cleanup(std::move(token));
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class BpeSuffix : public Decoder {
 public:
  explicit BpeSuffix(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    if (suffix_.empty()) return;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      tokens[i] = replace_all(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
    }
  }

 private:
  std::string suffix_;
};

class Replace : public Decoder {
 public:
  Replace(Regex pattern, std::string content) : pattern_(std::move(pattern)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) token = pattern_.replace(token, content_, growth_limit(token.size()), where);
  }

 private:
  Regex pattern_;
  std::string content_;
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& token : tokens) all += token;
    tokens.assign(1, std::move(all));
  }
};

// Up to `start` leading and `stop` trailing `content` characters off each token.
class Strip : public Decoder {
 public:
  Strip(char32_t content, std::size_t start, std::size_t stop) : content_(content), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& token : tokens) {
      std::vector<std::pair<std::size_t, char32_t>> chars;  // byte offset, character
      for (std::size_t i = 0; i < token.size();) {
        const std::size_t at = i;
        chars.emplace_back(at, utf8::next_code_point(token, i));
      }
      std::size_t begin = 0, end = chars.size();
      while (begin < start_ && begin < chars.size() && chars[begin].second == content_) ++begin;
      for (std::size_t n = 0; n < stop_ && end > begin && chars[end - 1].second == content_; ++n) --end;
      const std::size_t from = begin < chars.size() ? chars[begin].first : token.size();
      const std::size_t to = end < chars.size() ? chars[end].first : token.size();
      token = token.substr(from, to - from);
    }
  }

 private:
  char32_t content_;
  std::size_t start_, stop_;
};

char32_t one_character(const JsonNode& node) {
  const std::string s = node.string();
  std::size_t i = 0;
  const char32_t c = s.empty() ? 0 : utf8::next_code_point(s, i);
  if (s.empty() || i != s.size()) node.fail("must be one character");
  return c;
}

void add_decoders(const JsonNode& node, std::vector<std::unique_ptr<Decoder>>& out) {
  const std::string type = node.string("type");
  if (type == "Sequence") {
    const JsonNode steps = node.at("decoders");
    for (std::size_t i = 0; i < steps.size(); ++i) add_decoders(steps.item(i), out);
  } else if (type == "ByteLevel") {
    out.push_back(std::make_unique<ByteLevel>());
  } else if (type == "ByteFallback") {
    out.push_back(std::make_unique<ByteFallback>());
  } else if (type == "Metaspace") {
    std::string replacement;
    utf8::append(replacement, one_character(node.at("replacement")));
    const std::string scheme = node.string_or("prepend_scheme", "always");
    const bool prepends = scheme != "never" && node.boolean_or("add_prefix_space", true);
    out.push_back(std::make_unique<Metaspace>(std::move(replacement), prepends));
  } else if (type == "WordPiece") {
    out.push_back(std::make_unique<WordPiece>(node.string_or("prefix", "##"), node.boolean_or("cleanup", true)));
  } else if (type == "BPEDecoder") {
    out.push_back(std::make_unique<BpeSuffix>(node.string_or("suffix", "</w>")));
  } else if (type == "Replace") {
    out.push_back(std::make_unique<Replace>(make_pattern(node.at("pattern")), node.string("content")));
  } else if (type == "Fuse") {
    out.push_back(std::make_unique<Fuse>());
  } else if (type == "Strip") {
    out.push_back(std::make_unique<Strip>(one_character(node.at("content")), node.unsigned_or("start", 0, UINT32_MAX),
                                          node.unsigned_or("stop", 0, UINT32_MAX)));
  } else {
    node.at("type").fail("is '" + type +
                         "', a decoder accel does not support (it reads ByteLevel, ByteFallback, Metaspace, "
                         "WordPiece, BPEDecoder, Replace, Strip, Fuse and Sequence)");
  }
  if (type != "Sequence") out.back()->where = node.where() + " (" + type + ")";
}

}  // namespace

std::vector<std::unique_ptr<Decoder>> make_decoders(const JsonNode& node) {
  std::vector<std::unique_ptr<Decoder>> out;
  add_decoders(node, out);
  return out;
}

}  // namespace accel::tokenizers
