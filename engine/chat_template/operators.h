// Jinja2's operators on values with Python's semantics: arithmetic (ints
// stay exact and refuse overflow, / gives a float, // and % floor),
// `~`, `in`, subscripts, slices and attributes, and what a for loop sees
// when it iterates a value. Sizes of what they make are checked against
// the budget.
#pragma once
#include <optional>
#include <string>

#include "engine/chat_template/call.h"
#include "engine/chat_template/value.h"

namespace accel::chat_template {

// a op b for + - * / // % ** ~ == != < <= > >= in, "not in".
Value binary(const std::string& op, const Value& a, const Value& b, Budget& budget);
// -a, +a.
Value negate(const Value& a, bool minus);
// `obj.name`: a dict's methods first, then its keys; other values' methods.
// Undefined when there is none; an error on undefined `obj` and on names
// starting with "_" that are not a dict's keys (the sandbox).
Value attribute(const Value& obj, const std::string& name);
// `obj[key]`: keys and indices first, then methods.
Value item(const Value& obj, const Value& key);
// obj[start:stop:step] of a list or string (absent parts undefined).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget);
// The items a for loop sees: a list's items, a dict's keys, a string's
// characters, nothing for undefined; an error for anything else.
List iterate(const Value& v);
// Refuses to use an undefined value, saying what it stands for.
void require_defined(const Value& v, const char* use);

}  // namespace accel::chat_template
