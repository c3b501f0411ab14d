// Jinja2's filters (`x | name(args)`) and tests (`x is name args`) that
// chat templates use, with Jinja's arguments and results. tojson is
// transformers' own (json_text.h). An unknown name is an error naming it.
#pragma once
#include <string>

#include "engine/chat_template/call.h"
#include "engine/chat_template/value.h"

namespace accel::chat_template {

// c.args are the filter's arguments after its input.
Value apply_filter(const std::string& name, const Value& input, Call& c);
// c.args are the test's arguments after its subject.
bool apply_test(const std::string& name, const Value& subject, Call& c);

}  // namespace accel::chat_template
