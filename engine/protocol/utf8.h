// UTF-8 checks for names that reach other tools: metric names and config
// keys in trackers' files (TensorBoard's readers refuse strings that are not
// UTF-8), and run and metric names in the charts accel-run plot draws; and
// text quoted in error messages (quoted_for_message).
// Header-only, so the launcher uses it without linking the trackers.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace accel::tracking {

// The length of the well-formed UTF-8 sequence at s[i] (1 to 4), or 0 when
// the bytes there are not one (overlong forms, surrogates and code points
// past U+10FFFF included, as RFC 3629 says).
inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  std::size_t n;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) low = 0xA0;
    if (c == 0xED) high = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) low = 0x90;
    if (c == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return n;
}

inline bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

// Appends s[0, until) to `out`, every byte that is not part of well-formed
// UTF-8 (and, with `controls`, every control byte) written as \xNN; a
// character is never cut. Returns where it stopped.
inline std::size_t append_escaped(std::string& out, std::string_view s, std::size_t until, bool controls) {
  static const char hex[] = "0123456789abcdef";
  std::size_t i = 0;
  while (i < s.size() && i < until) {
    const std::size_t n = utf8_sequence_length(s, i);
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 0 || (controls && (c < 0x20 || c == 0x7f))) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return i;
}

// `s` with every byte that is not part of well-formed UTF-8 written as
// \xNN, for messages that name a bad string.
inline std::string escape_invalid_utf8(std::string_view s) {
  std::string out;
  append_escaped(out, s, s.size(), false);
  return out;
}

// `s` quoted as a message shows text read from a file or a recipe: control
// bytes (NUL, newlines, terminal escapes) and bytes that are not UTF-8 as
// \xNN, at most `shown` bytes of it, then its size: "'x\x00y'",
// "'aaaa...' (2000000 bytes)". A NUL would otherwise end the message.
inline std::string quoted_for_message(std::string_view s, std::size_t shown = 80) {
  std::string out = "'";
  const std::size_t stopped = append_escaped(out, s, shown, true);
  out += "'";
  if (stopped < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace accel::tracking
