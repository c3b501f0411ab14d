#include "engine/chat_template/chat_template.h"

#include "engine/chat_template/parser.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

std::string located(const std::string& origin, const TemplateError& e) {
  return origin + (e.line() ? ", line " + std::to_string(e.line()) : std::string()) + ": " + e.what();
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source, std::string origin) : origin_(std::move(origin)) {
  try {
    body_ = std::make_shared<const Body>(parse(source));
  } catch (const TemplateError& e) {
    throw TemplateError(located(origin_, e), e.line());
  }
}

Rendered ChatTemplate::render(const Dict& variables, const Limits& limits, int64_t clock) const {
  try {
    return evaluate(*body_, variables, limits, clock);
  } catch (const TemplateRaised& e) {
    throw TemplateRaised(located(origin_, e) + " (raised by the template)", e.line());
  } catch (const TemplateError& e) {
    throw TemplateError(located(origin_, e), e.line());
  }
}

}  // namespace accel::chat_template
