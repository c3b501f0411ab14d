// The one error type of chat templates. Its message names the template
// (its file, or "chat template" when it came as a string) and the line at
// fault: "'tokenizer_config.json' chat_template, line 3: 'foo' is undefined".
// Errors thrown below the evaluator carry no line yet (line == 0); the
// evaluator adds the line of the statement or expression that raised them.
#pragma once
#include <stdexcept>
#include <string>

namespace accel::chat_template {

class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& what, int line = 0) : std::runtime_error(what), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

// What the template's own {{ raise_exception(...) }} raised: its message as given.
class TemplateRaised : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

}  // namespace accel::chat_template
