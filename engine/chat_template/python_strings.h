// Python's str methods as chat templates call them, on UTF-8 text:
// whitespace is Python's (Unicode's), case mapping ICU's per character.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel::chat_template {

bool is_python_space(char32_t c);
// str.strip / lstrip / rstrip: `chars` (each of its characters) or whitespace.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) (whitespace runs when no sep); rsplit with from_right.
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep, int64_t maxsplit,
                               bool from_right);
std::string upper(const std::string& s);
std::string lower(const std::string& s);
// str.title: each run of letters starts upper, goes on lower.
std::string title(const std::string& s);
// str.capitalize: the first character upper, the rest lower.
std::string capitalize(const std::string& s);
// str.replace(old, new, count) (count < 0: all).
std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
// str.splitlines() without the line ends.
std::vector<std::string> splitlines(const std::string& s);
// The characters of s tested one by one (isdigit, isalpha...); false when empty.
bool all_characters(const std::string& s, bool (*test)(char32_t));
bool is_alpha(char32_t c);
bool is_digit(char32_t c);
bool is_alnum(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);

}  // namespace accel::chat_template
