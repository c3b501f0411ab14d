#include "engine/data/vocabulary.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "engine/utf8/utf8.h"

namespace accel::data {
namespace {

// Walks UTF-8 text character by character, tracking line and column for
// error messages.
class Utf8Reader {
 public:
  Utf8Reader(const std::string& text, const std::string& source) : text_(text), source_(source) {}

  bool done() const { return pos_ >= text_.size(); }

  // The next code point; invalid UTF-8 is an error naming line and column.
  char32_t next() {
    char_line_ = line_;
    char_column_ = column_ + 1;
    if (utf8::sequence_length(text_, pos_) == 0) {
      char byte[8];
      std::snprintf(byte, sizeof(byte), "0x%02X", static_cast<unsigned char>(text_[pos_]));
      throw std::runtime_error(where() + "byte " + byte +
                               " is not valid UTF-8 (read binary text with level = \"byte\")");
    }
    start_ = pos_;
    const char32_t cp = utf8::next_code_point(text_, pos_);
    ++column_;
    if (cp == '\n') {
      ++line_;
      column_ = 0;
    }
    return cp;
  }

  // The bytes of the character last returned by next().
  std::string last() const { return text_.substr(start_, pos_ - start_); }

  // "source:line:column: " of the character last read.
  std::string where() const {
    return source_ + ":" + std::to_string(char_line_) + ":" + std::to_string(char_column_) + ": ";
  }

 private:
  const std::string& text_;
  const std::string& source_;
  size_t pos_ = 0, start_ = 0;
  int64_t line_ = 1, column_ = 0;
  int64_t char_line_ = 1, char_column_ = 1;
};

std::string describe_code_point(char32_t cp, const std::string& bytes) {
  char code[16];
  std::snprintf(code, sizeof(code), "U+%04X", static_cast<unsigned>(cp));
  std::string shown = cp == '\n' ? "\\n" : cp == '\t' ? "\\t" : cp < 0x20 ? "" : bytes;
  return (shown.empty() ? std::string() : "'" + shown + "' ") + "(" + code + ")";
}

}  // namespace

TokenLevel parse_token_level(const std::string& name) {
  if (name == "byte") return TokenLevel::Byte;
  if (name == "char") return TokenLevel::Char;
  throw std::runtime_error("level must be \"char\" or \"byte\", got \"" + name + "\"");
}

const char* token_level_name(TokenLevel level) { return level == TokenLevel::Byte ? "byte" : "char"; }

Vocabulary Vocabulary::bytes() {
  Vocabulary v(TokenLevel::Byte);
  for (int b = 0; b < 256; ++b) v.tokens_.emplace_back(1, static_cast<char>(b));
  return v;
}

Vocabulary Vocabulary::chars_of(const std::string& text, const std::string& source) {
  Vocabulary v(TokenLevel::Char);
  std::unordered_map<char32_t, std::string> seen;
  Utf8Reader reader(text, source);
  while (!reader.done()) {
    char32_t cp = reader.next();
    if (seen.find(cp) == seen.end()) seen.emplace(cp, reader.last());
  }
  std::vector<char32_t> points;
  points.reserve(seen.size());
  for (const auto& entry : seen) points.push_back(entry.first);
  std::sort(points.begin(), points.end());
  for (char32_t cp : points) {
    v.tokens_.push_back(seen[cp]);
    v.ids_.emplace(cp, static_cast<int64_t>(v.tokens_.size()));
  }
  return v;
}

at::Tensor Vocabulary::encode(const std::string& text, const std::string& source) const {
  if (level_ == TokenLevel::Byte) {
    at::Tensor ids = at::empty({static_cast<int64_t>(text.size())}, at::kLong);
    int64_t* out = ids.data_ptr<int64_t>();
    for (unsigned char c : text) *out++ = static_cast<int64_t>(c) + 1;
    return ids;
  }
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  Utf8Reader reader(text, source);
  while (!reader.done()) {
    char32_t cp = reader.next();
    auto found = ids_.find(cp);
    if (found == ids_.end()) {
      throw std::runtime_error(reader.where() + "character " + describe_code_point(cp, reader.last()) +
                               " is not in the vocabulary (" + std::to_string(size()) +
                               " characters)");
    }
    ids.push_back(found->second);
  }
  return at::tensor(ids, at::kLong);
}

std::string Vocabulary::decode(const at::Tensor& ids) const {
  if (ids.dim() > 1) {
    throw std::runtime_error("decode takes a 1-D tensor of ids, got shape " +
                             c10::str(ids.sizes()));
  }
  if (at::isFloatingType(ids.scalar_type()) || ids.scalar_type() == at::kBool) {
    throw std::runtime_error(std::string("decode takes integer ids, got a ") +
                             c10::toString(ids.scalar_type()) + " tensor");
  }
  at::Tensor flat = ids.reshape({-1}).to(at::kLong).contiguous();
  const int64_t* p = flat.data_ptr<int64_t>();
  std::string text;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (p[i] < 1 || p[i] > size()) {
      throw std::runtime_error("decode: id " + std::to_string(p[i]) + " at position " +
                               std::to_string(i + 1) + " is not in 1.." + std::to_string(size()));
    }
    text += tokens_[static_cast<size_t>(p[i] - 1)];
  }
  return text;
}

}  // namespace accel::data
