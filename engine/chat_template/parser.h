// Tokens (lexer.h) to a syntax tree (syntax_tree.h), by Jinja2's grammar
// and precedence: `if` expressions, or, and, not, comparisons and `in`,
// + -, ~, * / // %, **, unary - +, then postfix (.attr, [item], [a:b:c],
// calls) and filters and `is` tests. The statements are those chat
// templates use; `extends`, `include` and `import` reach other files and
// are refused, as is anything nested deeper than kMaxNesting.
#pragma once
#include <string>

#include "engine/chat_template/syntax_tree.h"

namespace accel::chat_template {

constexpr int kMaxNesting = 100;

// Throws TemplateError naming the line.
Body parse(const std::string& source);

}  // namespace accel::chat_template
