#include "engine/utf8/utf8.h"

namespace accel::utf8 {
namespace {

// How many bytes from s[i] on form the longest prefix of a well-formed
// sequence (RFC 3629's ranges), and whether that prefix is the whole
// character. A lone continuation byte or a byte no sequence starts with
// has a prefix of 1 that is not whole. The check and the lossy decoding
// both read it, so they agree on every byte.
struct Prefix {
  std::size_t length;
  bool whole;
};

Prefix valid_prefix(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {1, true};
  std::size_t width;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    width = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    width = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    width = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {1, false};
  }
  if (i + 1 >= s.size() || byte(i + 1) < low || byte(i + 1) > high) return {1, false};
  for (std::size_t k = 2; k < width; ++k) {
    if (i + k >= s.size() || byte(i + k) < 0x80 || byte(i + k) > 0xBF) return {k, false};
  }
  return {width, true};
}

}  // namespace

std::size_t sequence_length(std::string_view s, std::size_t i) {
  const Prefix p = valid_prefix(s, i);
  return p.whole ? p.length : 0;
}

std::size_t first_invalid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = valid_prefix(s, i);
    if (!p.whole) return i;
    i += p.length;
  }
  return std::string_view::npos;
}

void append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    const Prefix p = valid_prefix(bytes, i);
    if (p.whole) {
      out.append(bytes.substr(i, p.length));
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += p.length;
  }
  return out;
}

std::size_t append_escaped(std::string& out, std::string_view s, std::size_t until, bool controls) {
  static const char hex[] = "0123456789abcdef";
  std::size_t i = 0;
  while (i < s.size() && i < until) {
    const std::size_t n = sequence_length(s, i);
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

std::string escape_invalid(std::string_view s) {
  std::string out;
  append_escaped(out, s, s.size(), false);
  return out;
}

std::string quoted_for_message(std::string_view s, std::size_t shown) {
  std::string out = "'";
  const std::size_t stopped = append_escaped(out, s, shown, true);
  out += "'";
  if (stopped < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace accel::utf8
