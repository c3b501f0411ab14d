// Chat templates: the Jinja2 programs (tokenizer_config.json's
// chat_template, chat_template.jinja) that turn a conversation into the
// text an instruct model was trained on, run as transformers runs them
// (render_jinja_template: trim_blocks, lstrip_blocks, loop controls,
// {% generation %}, its tojson, raise_exception and strftime_now).
//
// Why the interpreter is written here: no Jinja library for C++ installs
// from Debian or PyPI among the packages this project may use (Jinja2 is
// Python; minja and jinja2cpp are neither packaged nor vendored), so the
// subset chat templates use is implemented in engine/chat_template/:
// lexer.h (whitespace control), parser.h (the grammar), evaluator.h
// (scopes, loops, macros), operators.h, filters.h, methods.h, builtins.h,
// json_text.h (tojson). It needs no LibTorch.
//
// Sandboxed: a template reaches only the values it is given (no attribute
// leads to anything else; names starting with "_" are refused), changes
// none of them but its own namespace()s, and each render is bounded
// (call.h's Limits: the text's and any value's size, the work done, the
// depth of macro calls), so a hostile template ends with a TemplateError
// within seconds. No byte of a template is ever executed as code.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "engine/chat_template/call.h"
#include "engine/chat_template/evaluator.h"
#include "engine/chat_template/value.h"

namespace accel::chat_template {

class ChatTemplate {
 public:
  // Parses `source`; `origin` names it in errors ("'dir/chat_template.jinja'").
  // Throws TemplateError "<origin>, line N: ...".
  ChatTemplate(const std::string& source, std::string origin);

  // The text for `variables` (messages, add_generation_prompt, tools...)
  // and the spans its generation blocks printed. `clock`: seconds since
  // the epoch for strftime_now. Throws TemplateError naming origin and
  // line; TemplateRaised when the template called raise_exception.
  Rendered render(const Dict& variables, const Limits& limits, int64_t clock) const;

  const std::string& origin() const { return origin_; }

 private:
  std::shared_ptr<const Body> body_;
  std::string origin_;
};

}  // namespace accel::chat_template
