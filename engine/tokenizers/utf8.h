// UTF-8 as the tokenizers handle it: code points in and out of text that is
// already known to be valid, the check that makes it so (text from a recipe
// or a file may be any bytes), and the lossy decoding the reference's
// decoders end with (Rust's String::from_utf8_lossy: one U+FFFD for each
// maximal ill-formed subsequence, as the Unicode standard recommends).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace accel::tokenizers {

// The code point starting at text[i] of valid UTF-8; `i` moves past it.
inline char32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  if (lead < 0xE0) {
    const char32_t c = (char32_t(lead & 0x1F) << 6) | (byte(i + 1) & 0x3F);
    i += 2;
    return c;
  }
  if (lead < 0xF0) {
    const char32_t c = (char32_t(lead & 0x0F) << 12) | (char32_t(byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F);
    i += 3;
    return c;
  }
  const char32_t c = (char32_t(lead & 0x07) << 18) | (char32_t(byte(i + 1) & 0x3F) << 12) |
                     (char32_t(byte(i + 2) & 0x3F) << 6) | (byte(i + 3) & 0x3F);
  i += 4;
  return c;
}

// The byte length of the character whose lead byte is `lead` (valid UTF-8).
inline std::size_t utf8_char_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, char32_t c);

// The offset of the first byte of `text` that is not part of well-formed
// UTF-8, or npos when it all is.
std::size_t first_invalid_utf8(std::string_view text);

// `bytes` as text, each maximal ill-formed subsequence replaced by U+FFFD.
std::string utf8_lossy(std::string_view bytes);

}  // namespace accel::tokenizers
