// Token ids for character- and byte-level text. Ids are 1-based, as every
// index in the Lua API (an Embedding reads them as they are).
//   byte level: the 256 byte values, id = byte + 1, so any text encodes.
//   char level: the distinct UTF-8 characters of a text, sorted by code
//   point; text with a character outside the vocabulary does not encode.
// Errors name the source (a file path, or what the caller passes), the line
// and the column of the offending character.
#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace accel::data {

enum class TokenLevel { Byte, Char };

// "byte" or "char"; anything else is an error naming the value.
TokenLevel parse_token_level(const std::string& name);
const char* token_level_name(TokenLevel level);

class Vocabulary {
 public:
  static Vocabulary bytes();
  // The characters of `text`; `source` names it in errors (invalid UTF-8).
  static Vocabulary chars_of(const std::string& text, const std::string& source);

  TokenLevel level() const { return level_; }
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }
  // Token strings in id order (tokens()[0] has id 1).
  const std::vector<std::string>& tokens() const { return tokens_; }

  // 1-D int64 tensor of ids.
  at::Tensor encode(const std::string& text, const std::string& source) const;
  // The text of a 0-D or 1-D integer tensor of ids; an id outside
  // 1..size() is an error naming it and its position.
  std::string decode(const at::Tensor& ids) const;

 private:
  explicit Vocabulary(TokenLevel level) : level_(level) {}

  TokenLevel level_;
  std::vector<std::string> tokens_;
  std::unordered_map<char32_t, int64_t> ids_;  // char level: code point -> id
};

}  // namespace accel::data
