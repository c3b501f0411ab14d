// tojson as transformers' environment defines it: Python's json.dumps with
// ensure_ascii = false, indent and separators as given, keys in the dict's
// own order unless sort_keys (json.dumps' defaults otherwise: ", " and ": "
// on one line, "," and ": " with an indent).
#pragma once
#include <optional>
#include <string>

#include "engine/chat_template/call.h"
#include "engine/chat_template/value.h"

namespace accel::chat_template {

struct JsonOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // what each level adds; none: one line
  std::optional<std::string> item_separator;
  std::optional<std::string> key_separator;
  bool sort_keys = false;
};

// Throws TemplateError for undefined and callables (json.dumps cannot
// write them) and past the budget's size limit.
std::string to_json(const Value& v, const JsonOptions& options, Budget& budget);

}  // namespace accel::chat_template
