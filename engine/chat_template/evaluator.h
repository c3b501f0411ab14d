// Runs a parsed template (syntax_tree.h) over its variables, as Jinja2
// renders with transformers' environment: output in order, scopes as
// Jinja's (a for loop's and a macro's assignments stay inside them; if
// blocks have none), `loop` in for loops, macros with defaults and
// caller(), filter blocks and block sets captured, and the spans of the
// text each {% generation %} block printed (byte offsets into the text,
// at the top level as transformers' AssistantTracker counts them).
// Every statement, expression and loop turn is counted against the
// budget, and the text against its size limit.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat_template/call.h"
#include "engine/chat_template/syntax_tree.h"

namespace accel::chat_template {

struct Rendered {
  std::string text;
  std::vector<std::pair<std::size_t, std::size_t>> generation_spans;  // [begin, end) bytes of text
};

// Throws TemplateError with the line of the statement or expression at fault.
Rendered evaluate(const Body& body, const Dict& variables, const Limits& limits, int64_t clock);

}  // namespace accel::chat_template
