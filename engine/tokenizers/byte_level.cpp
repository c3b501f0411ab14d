#include "engine/tokenizers/byte_level.h"

#include <array>

#include "engine/utf8/utf8.h"

namespace accel::tokenizers {
namespace {

struct Alphabet {
  std::array<char32_t, 256> char_of{};
  std::array<std::string, 256> utf8_of;  // char_of[b] as UTF-8, ready to append

  Alphabet() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char_of[b] = printable ? static_cast<char32_t>(b) : next++;
      utf8::append(utf8_of[b], char_of[b]);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

void append_byte_level(std::string& out, std::string_view bytes) {
  const Alphabet& a = alphabet();
  for (const char byte : bytes) out += a.utf8_of[static_cast<unsigned char>(byte)];
}

std::optional<std::string> byte_level_bytes(std::string_view token) {
  // Every character of the alphabet is below U+0144.
  static const std::array<int, 0x144> byte_of = [] {
    std::array<int, 0x144> table;
    table.fill(-1);
    const Alphabet& a = alphabet();
    for (int b = 0; b < 256; ++b) table[a.char_of[b]] = b;
    return table;
  }();
  std::string bytes;
  bytes.reserve(token.size());
  for (std::size_t i = 0; i < token.size();) {
    const char32_t c = utf8::next_code_point(token, i);
    if (c >= byte_of.size() || byte_of[c] < 0) return std::nullopt;
    bytes += static_cast<char>(byte_of[c]);
  }
  return bytes;
}

}  // namespace accel::tokenizers
