// UTF-8, the one module the engine, the launcher and the tokenizers use:
// the RFC 3629 check (overlong forms, surrogates and code points past
// U+10FFFF are ill-formed), code points in and out of text already known to
// be valid, the lossy decoding the tokenizers' decoders end with (Rust's
// String::from_utf8_lossy: one U+FFFD for each maximal ill-formed
// subsequence, as the Unicode standard recommends), and text quoted for
// messages (a string from a file or a recipe is never printed back raw).
// No LibTorch and no other library: every layer may link it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace accel::utf8 {

// The length of the well-formed sequence at s[i] (1 to 4), or 0 when the
// bytes there are not one.
std::size_t sequence_length(std::string_view s, std::size_t i);

// The offset of the first byte of `s` that is not part of well-formed
// UTF-8, or npos when it all is.
std::size_t first_invalid(std::string_view s);
inline bool valid(std::string_view s) { return first_invalid(s) == std::string_view::npos; }

// The code point starting at text[i] of valid UTF-8; `i` moves past it.
// Inline: the tokenizers call it for every character they read.
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
inline std::size_t char_length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Whether s[i] continues a character rather than starting one.
inline bool is_continuation(std::string_view s, std::size_t i) {
  return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
}

// Appends code point `c` (at most U+10FFFF, not a surrogate) as UTF-8.
void append(std::string& out, char32_t c);

// `bytes` as text, each maximal ill-formed subsequence replaced by U+FFFD.
std::string lossy(std::string_view bytes);

// Appends s[0, until) to `out`, every byte that is not part of well-formed
// UTF-8 (and, with `controls`, every control byte) written as \xNN; a
// character is never cut. Returns where it stopped.
std::size_t append_escaped(std::string& out, std::string_view s, std::size_t until, bool controls);

// `s` with every byte that is not part of well-formed UTF-8 written as
// \xNN, for messages that name a bad string.
std::string escape_invalid(std::string_view s);

// `s` quoted as a message shows text read from a file or a recipe: control
// bytes (NUL, newlines, terminal escapes) and bytes that are not UTF-8 as
// \xNN, at most `shown` bytes of it, then its size: "'x\x00y'",
// "'aaaa...' (2000000 bytes)". A NUL would otherwise end the message.
std::string quoted_for_message(std::string_view s, std::size_t shown = 80);

}  // namespace accel::utf8
