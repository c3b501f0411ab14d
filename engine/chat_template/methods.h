// The methods templates call on values, bound to their value: Python's str
// methods (strip, split, startswith, replace, upper, title, join, find,
// count, format-free), dict's items, keys, values and get, list's index and
// count. Nothing that changes a value is here (transformers' environment is
// Jinja's immutable sandbox): no append, update or pop.
#pragma once
#include <optional>
#include <string>

#include "engine/chat_template/value.h"

namespace accel::chat_template {

// `obj.name` as a callable, or nothing when the value's type has no such method.
std::optional<Value> method(const Value& obj, const std::string& name);

}  // namespace accel::chat_template
