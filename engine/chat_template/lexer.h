// A template's text as tokens, with Jinja2's whitespace control applied as
// transformers' environment sets it: `{%-`/`-%}` (and the same on `{{ }}`
// and `{# #}`) strip the whitespace beside the tag, `trim_blocks` drops the
// newline after a block or comment tag, `lstrip_blocks` the spaces and tabs
// before one on its line (`{%+` keeps them). Comments leave no token;
// `{% raw %}...{% endraw %}` is text. Line ends read as "\n" and one
// trailing newline is dropped, as Jinja's keep_trailing_newline = false.
#pragma once
#include <string>
#include <vector>

namespace accel::chat_template {

struct Token {
  enum class Kind {
    Text,        // template text to print as it is
    PrintBegin,  // {{
    PrintEnd,    // }}
    BlockBegin,  // {%
    BlockEnd,    // %}
    Name,
    String,      // value: the literal's text, escapes resolved
    Integer,
    Float,
    Operator,    // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : |
    End,
  };
  Kind kind;
  std::string value;
  int line;
};

// Throws TemplateError naming the line of an unclosed tag, string or
// comment, or a character no expression has.
std::vector<Token> lex(const std::string& source);

}  // namespace accel::chat_template
