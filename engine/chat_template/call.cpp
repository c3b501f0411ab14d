#include "engine/chat_template/call.h"

#include "engine/chat_template/template_error.h"

namespace accel::chat_template {

void Budget::step(uint64_t n) {
  steps_ += n;
  if (steps_ > limits_.max_steps) {
    throw TemplateError("the template ran past its limit of " + std::to_string(limits_.max_steps) +
                        " steps (an endless or very long loop?)");
  }
}

void Budget::check_size(std::size_t bytes, const char* what) const {
  if (bytes > limits_.max_output_bytes) {
    throw TemplateError(std::string(what) + " would reach " + std::to_string(bytes) + ", past the template's limit of " +
                        std::to_string(limits_.max_output_bytes) + " bytes");
  }
}

Value Call::arg(std::size_t i, const char* name, Value fallback) const {
  if (i < args.size()) return args[i];
  for (const auto& [key, value] : kwargs) {
    if (key == name) return value;
  }
  return fallback;
}

void Call::expect(std::size_t positional, std::initializer_list<const char*> names) const {
  if (args.size() > positional) {
    fail("takes at most " + std::to_string(positional) + " positional argument" + (positional == 1 ? "" : "s") +
         ", got " + std::to_string(args.size()));
  }
  for (const auto& kw : kwargs) {
    bool known = false;
    std::size_t index = 0;
    for (const char* n : names) {
      if (kw.first == n) {
        known = true;
        if (index < args.size()) fail("got argument '" + kw.first + "' twice");
      }
      ++index;
    }
    if (!known) fail("has no argument '" + kw.first + "'");
  }
}

void Call::fail(const std::string& message) const { throw TemplateError(what + " " + message); }

std::string Call::string_arg(std::size_t i, const char* name, const std::string& fallback) const {
  const Value v = arg(i, name);
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_string()) fail("needs a string for '" + std::string(name) + "', got a " + v.type_name());
  return v.as_string();
}

int64_t Call::int_arg(std::size_t i, const char* name, int64_t fallback) const {
  const Value v = arg(i, name);
  if (v.is_undefined() || v.is_none()) return fallback;
  if (!v.is_integer()) fail("needs an integer for '" + std::string(name) + "', got a " + v.type_name());
  return v.as_int();
}

bool Call::bool_arg(std::size_t i, const char* name, bool fallback) const {
  const Value v = arg(i, name);
  if (v.is_undefined()) return fallback;
  return v.truthy();
}

}  // namespace accel::chat_template
