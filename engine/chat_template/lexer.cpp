#include "engine/chat_template/lexer.h"

#include <cctype>
#include <cstring>

#include "engine/chat_template/template_error.h"
#include "engine/tokenizers/utf8.h"

namespace accel::chat_template {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

void rstrip(std::string& text) {
  while (!text.empty() && is_space(text.back())) text.pop_back();
}

class Lexer {
 public:
  explicit Lexer(const std::string& source) : s_(source) {}  // source outlives the lexer

  std::vector<Token> run() {
    while (pos_ < s_.size()) {
      const std::size_t open = next_tag(pos_);
      std::string text = s_.substr(pos_, open == std::string::npos ? std::string::npos : open - pos_);
      if (open == std::string::npos) {
        emit_text(std::move(text));
        break;
      }
      const char kind = s_[open + 1];
      const char modifier = open + 2 < s_.size() ? s_[open + 2] : '\0';
      if (modifier == '-') {
        rstrip(text);
      } else if (kind != '{' && modifier != '+') {
        lstrip_line(text);
      }
      emit_text(std::move(text));
      advance_to(open);
      const int tag_line = line_;
      advance_to(open + 2 + (modifier == '-' || modifier == '+'));
      if (kind == '#') {
        close_comment(tag_line);
      } else if (kind == '%' && raw_block(tag_line)) {
        continue;
      } else {
        expression(kind == '{', tag_line);
      }
    }
    tokens_.push_back({Token::Kind::End, "", line_});
    return std::move(tokens_);
  }

 private:
  std::size_t next_tag(std::size_t from) const {
    for (std::size_t i = s_.find('{', from); i != std::string::npos; i = s_.find('{', i + 1)) {
      if (i + 1 < s_.size() && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // lstrip_blocks: the spaces and tabs between the line's start and the tag.
  void lstrip_line(std::string& text) const {
    const std::size_t newline = text.rfind('\n');
    const std::size_t start = newline == std::string::npos ? 0 : newline + 1;
    if (start == 0 && !line_starting_) return;
    for (std::size_t i = start; i < text.size(); ++i) {
      if (!is_space(text[i])) return;
    }
    text.erase(start);
  }

  void emit_text(std::string text) {
    if (!text.empty()) tokens_.push_back({Token::Kind::Text, std::move(text), line_});
  }

  void advance_to(std::size_t to) {
    for (; pos_ < to && pos_ < s_.size(); ++pos_) line_ += s_[pos_] == '\n';
  }

  // After a tag's closing characters at pos_: `-` before them strips the
  // whitespace after; else trim_blocks drops one newline (blocks, comments).
  void after_close(bool stripped, bool trim_newline) {
    if (stripped) {
      std::size_t end = pos_;
      while (end < s_.size() && is_space(s_[end])) ++end;
      advance_to(end);
    } else if (trim_newline && pos_ < s_.size() && s_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
    line_starting_ = pos_ > 0 && s_[pos_ - 1] == '\n';
  }

  void close_comment(int tag_line) {
    const std::size_t close = s_.find("#}", pos_);
    if (close == std::string::npos) throw TemplateError("the comment opened here is never closed", tag_line);
    const bool stripped = close > pos_ && s_[close - 1] == '-';
    advance_to(close + 2);
    after_close(stripped, true);
  }

  // {% raw %} ... {% endraw %}: the text between, untouched.
  bool raw_block(int tag_line) {
    std::size_t i = pos_;
    while (i < s_.size() && is_space(s_[i])) ++i;
    if (s_.compare(i, 3, "raw") != 0) return false;
    i += 3;
    while (i < s_.size() && is_space(s_[i])) ++i;
    const bool stripped = i < s_.size() && s_[i] == '-';
    if (s_.compare(i + stripped, 2, "%}") != 0) return false;
    advance_to(i + stripped + 2);
    after_close(stripped, true);
    for (std::size_t open = s_.find("{%", pos_); open != std::string::npos; open = s_.find("{%", open + 2)) {
      std::size_t k = open + 2;
      const bool strip_before = k < s_.size() && s_[k] == '-';
      k += strip_before;
      while (k < s_.size() && is_space(s_[k])) ++k;
      if (s_.compare(k, 6, "endraw") != 0) continue;
      k += 6;
      while (k < s_.size() && is_space(s_[k])) ++k;
      const bool strip_after = k < s_.size() && s_[k] == '-';
      if (s_.compare(k + strip_after, 2, "%}") != 0) continue;
      std::string text = s_.substr(pos_, open - pos_);
      if (strip_before) rstrip(text);
      emit_text(std::move(text));
      advance_to(k + strip_after + 2);
      after_close(strip_after, true);
      return true;
    }
    throw TemplateError("the raw block opened here has no {% endraw %}", tag_line);
  }

  void expression(bool print, int tag_line) {
    tokens_.push_back({print ? Token::Kind::PrintBegin : Token::Kind::BlockBegin, "", tag_line});
    const char closer = print ? '}' : '%';
    int depth = 0;  // open brackets: a `}}` inside a dict literal closes nothing
    while (true) {
      while (pos_ < s_.size() && is_space(s_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= s_.size()) {
        throw TemplateError(std::string("the ") + (print ? "{{" : "{%") + " opened here is never closed", tag_line);
      }
      const char c = s_[pos_];
      if (depth == 0) {
        const bool stripped = c == '-' && pos_ + 2 < s_.size() && s_[pos_ + 1] == closer && s_[pos_ + 2] == '}';
        if (stripped || (c == closer && pos_ + 1 < s_.size() && s_[pos_ + 1] == '}')) {
          tokens_.push_back({print ? Token::Kind::PrintEnd : Token::Kind::BlockEnd, "", line_});
          advance_to(pos_ + (stripped ? 3 : 2));
          after_close(stripped, !print);
          return;
        }
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t end = pos_;
        while (end < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) ++end;
        push(Token::Kind::Name, s_.substr(pos_, end - pos_), end);
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
      } else if (c == '\'' || c == '"') {
        string_literal(c);
      } else {
        operator_token(depth);
      }
    }
  }

  void push(Token::Kind kind, std::string value, std::size_t end) {
    tokens_.push_back({kind, std::move(value), line_});
    advance_to(end);
  }

  void number() {
    std::size_t end = pos_;
    const auto digits = [&] {
      while (end < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[end])) || s_[end] == '_')) ++end;
    };
    digits();
    bool is_float = false;
    if (end + 1 < s_.size() && s_[end] == '.' && std::isdigit(static_cast<unsigned char>(s_[end + 1]))) {
      ++end;
      digits();
      is_float = true;
    }
    if (end < s_.size() && (s_[end] == 'e' || s_[end] == 'E')) {
      std::size_t k = end + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) {
        end = k;
        digits();
        is_float = true;
      }
    }
    std::string text;
    for (std::size_t i = pos_; i < end; ++i) {
      if (s_[i] != '_') text += s_[i];
    }
    push(is_float ? Token::Kind::Float : Token::Kind::Integer, text, end);
  }

  // Python's escapes in a quoted literal.
  void string_literal(char quote) {
    const int start_line = line_;
    std::string value;
    std::size_t i = pos_ + 1;
    for (; i < s_.size() && s_[i] != quote; ++i) {
      if (s_[i] != '\\' || i + 1 >= s_.size()) {
        value += s_[i];
        continue;
      }
      const char e = s_[++i];
      switch (e) {
        case 'n': value += '\n'; break;
        case 't': value += '\t'; break;
        case 'r': value += '\r'; break;
        case '0': value += '\0'; break;
        case 'b': value += '\b'; break;
        case 'f': value += '\f'; break;
        case 'v': value += '\v'; break;
        case '\n': break;  // a line continued
        case 'x':
        case 'u':
        case 'U': {
          const std::size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n >= s_.size()) throw TemplateError("a truncated \\" + std::string(1, e) + " escape", line_);
          const std::string hex = s_.substr(i + 1, n);
          if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            throw TemplateError("a bad \\" + std::string(1, e) + " escape: " + hex, line_);
          }
          const unsigned long code = std::stoul(hex, nullptr, 16);
          if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
            throw TemplateError("the escape \\" + std::string(1, e) + hex + " is not a character", line_);
          }
          tokenizers::append_utf8(value, static_cast<char32_t>(code));
          i += n;
          break;
        }
        default:
          if (e != quote && e != '\\' && e != '\'' && e != '"') value += '\\';
          value += e;
      }
    }
    if (i >= s_.size()) throw TemplateError("the string opened here is never closed", start_line);
    tokens_.push_back({Token::Kind::String, std::move(value), start_line});
    advance_to(i + 1);
  }

  void operator_token(int& depth) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        push(Token::Kind::Operator, op, pos_ + 2);
        return;
      }
    }
    const char c = s_[pos_];
    if (std::strchr("+-*/%~<>=()[]{},.:|", c) == nullptr) {
      throw TemplateError(std::string("unexpected character '") + c + "' in a tag", line_);
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    push(Token::Kind::Operator, std::string(1, c), pos_ + 1);
  }

  const std::string& s_;
  std::size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
  // As Jinja's environment: line ends read as "\n", one trailing newline dropped.
  std::string text;
  text.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      text += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      text += source[i];
    }
  }
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return Lexer(text).run();
}

}  // namespace accel::chat_template
