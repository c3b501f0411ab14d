#include "engine/chat_template/python_strings.h"

#include <unicode/uchar.h>

#include "engine/tokenizers/utf8.h"

namespace accel::chat_template {
namespace {

std::u32string decode(const std::string& s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size();) out += tokenizers::next_code_point(s, i);
  return out;
}

std::string encode(const std::u32string& s) {
  std::string out;
  for (const char32_t c : s) tokenizers::append_utf8(out, c);
  return out;
}

template <typename F>
std::string map_characters(const std::string& s, F f) {
  std::u32string u = decode(s);
  for (auto& c : u) c = f(c);
  return encode(u);
}

char32_t to_upper(char32_t c) { return static_cast<char32_t>(u_toupper(static_cast<UChar32>(c))); }
char32_t to_lower(char32_t c) { return static_cast<char32_t>(u_tolower(static_cast<UChar32>(c))); }

}  // namespace

bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_alpha(char32_t c) { return u_isalpha(static_cast<UChar32>(c)); }
bool is_digit(char32_t c) { return u_isdigit(static_cast<UChar32>(c)); }
bool is_alnum(char32_t c) { return is_alpha(c) || is_digit(c); }
bool is_upper(char32_t c) { return u_isupper(static_cast<UChar32>(c)); }
bool is_lower(char32_t c) { return u_islower(static_cast<UChar32>(c)); }

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right) {
  const std::u32string u = decode(s);
  const std::u32string set = chars ? decode(*chars) : std::u32string();
  const auto stripped = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : is_python_space(c); };
  std::size_t begin = 0, end = u.size();
  if (left) {
    while (begin < end && stripped(u[begin])) ++begin;
  }
  if (right) {
    while (end > begin && stripped(u[end - 1])) --end;
  }
  return encode(u.substr(begin, end - begin));
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (from_right) {
      std::size_t end = s.size();
      while (maxsplit != 0) {
        const std::size_t at = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string::npos;
        if (at == std::string::npos) break;
        out.insert(out.begin(), s.substr(at + sep->size(), end - at - sep->size()));
        end = at;
        --maxsplit;
      }
      out.insert(out.begin(), s.substr(0, end));
      return out;
    }
    std::size_t start = 0;
    while (maxsplit != 0) {
      const std::size_t at = s.find(*sep, start);
      if (at == std::string::npos) break;
      out.push_back(s.substr(start, at - start));
      start = at + sep->size();
      --maxsplit;
    }
    out.push_back(s.substr(start));
    return out;
  }
  // Whitespace: runs split, ends dropped; what maxsplit leaves keeps its inner spaces.
  const std::u32string u = decode(s);
  if (from_right) {
    std::size_t end = u.size();
    while (true) {
      while (end > 0 && is_python_space(u[end - 1])) --end;
      if (end == 0) break;
      if (maxsplit == 0) {
        out.insert(out.begin(), strip(encode(u.substr(0, end)), std::nullopt, true, false));
        break;
      }
      std::size_t start = end;
      while (start > 0 && !is_python_space(u[start - 1])) --start;
      out.insert(out.begin(), encode(u.substr(start, end - start)));
      end = start;
      --maxsplit;
    }
    return out;
  }
  std::size_t i = 0;
  while (true) {
    while (i < u.size() && is_python_space(u[i])) ++i;
    if (i == u.size()) break;
    if (maxsplit == 0) {
      out.push_back(strip(encode(u.substr(i)), std::nullopt, false, true));
      break;
    }
    std::size_t end = i;
    while (end < u.size() && !is_python_space(u[end])) ++end;
    out.push_back(encode(u.substr(i, end - i)));
    i = end;
    --maxsplit;
  }
  return out;
}

std::string upper(const std::string& s) { return map_characters(s, to_upper); }
std::string lower(const std::string& s) { return map_characters(s, to_lower); }

std::string title(const std::string& s) {
  std::u32string u = decode(s);
  bool previous_cased = false;
  for (auto& c : u) {
    const bool cased = is_alpha(c);
    c = cased ? (previous_cased ? to_lower(c) : to_upper(c)) : c;
    previous_cased = cased;
  }
  return encode(u);
}

std::string capitalize(const std::string& s) {
  std::u32string u = decode(s);
  for (std::size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? to_upper(u[i]) : to_lower(u[i]);
  return encode(u);
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  std::string out;
  if (from.empty()) {  // Python puts `to` between characters and at both ends
    std::size_t i = 0;
    for (; i < s.size() && count != 0; --count) {
      out += to;
      const std::size_t n = tokenizers::utf8_char_length(static_cast<unsigned char>(s[i]));
      out += s.substr(i, n);
      i += n;
    }
    if (i == s.size() && count != 0) out += to;
    return out + s.substr(i);
  }
  std::size_t start = 0;
  for (std::size_t at; count != 0 && (at = s.find(from, start)) != std::string::npos; --count) {
    out += s.substr(start, at - start) + to;
    start = at + from.size();
  }
  return out + s.substr(start);
}

std::vector<std::string> splitlines(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' || s[i] == '\r') {
      out.push_back(s.substr(start, i - start));
      if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
      start = i + 1;
    }
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

bool all_characters(const std::string& s, bool (*test)(char32_t)) {
  if (s.empty()) return false;
  for (const char32_t c : decode(s)) {
    if (!test(c)) return false;
  }
  return true;
}

}  // namespace accel::chat_template
