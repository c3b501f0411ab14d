#include "engine/tokenizers/utf8.h"

namespace accel::tokenizers {
namespace {

// How many bytes from text[i] on form the longest prefix of a well-formed
// sequence (RFC 3629's ranges), and whether that prefix is the whole
// character. A lone continuation byte or a byte no sequence starts with
// has a prefix of 1 that is not whole.
struct Prefix {
  std::size_t length;
  bool whole;
};

Prefix valid_prefix(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
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
  if (i + 1 >= text.size() || byte(i + 1) < low || byte(i + 1) > high) return {1, false};
  for (std::size_t k = 2; k < width; ++k) {
    if (i + k >= text.size() || byte(i + k) < 0x80 || byte(i + k) > 0xBF) return {k, false};
  }
  return {width, true};
}

}  // namespace

void append_utf8(std::string& out, char32_t c) {
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

std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    const Prefix p = valid_prefix(text, i);
    if (!p.whole) return i;
    i += p.length;
  }
  return std::string_view::npos;
}

std::string utf8_lossy(std::string_view bytes) {
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

}  // namespace accel::tokenizers
