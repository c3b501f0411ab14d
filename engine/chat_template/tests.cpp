// Jinja2's tests: `x is defined`, `x is none`, `x is divisibleby 3`...
#include <map>

#include "engine/chat_template/filters.h"
#include "engine/chat_template/operators.h"
#include "engine/chat_template/python_strings.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

using Test = bool (*)(const Value& v, Call& c);

Value other(Call& c) {
  c.expect(1, {});
  if (c.args.empty()) c.fail("needs a value to compare with");
  return c.args[0];
}

bool integer_parity(const Value& v, Call& c, int remainder) {
  c.expect(0, {});
  if (!v.is_integer()) c.fail("needs an integer, got a " + std::string(v.type_name()));
  return ((v.as_int() % 2) + 2) % 2 == remainder;
}

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> t = {
      {"defined", [](const Value& v, Call&) { return !v.is_undefined(); }},
      {"undefined", [](const Value& v, Call&) { return v.is_undefined(); }},
      {"none", [](const Value& v, Call&) { return v.is_none(); }},
      {"boolean", [](const Value& v, Call&) { return v.kind() == Value::Kind::Bool; }},
      {"true", [](const Value& v, Call&) { return v.kind() == Value::Kind::Bool && v.as_bool(); }},
      {"false", [](const Value& v, Call&) { return v.kind() == Value::Kind::Bool && !v.as_bool(); }},
      {"integer", [](const Value& v, Call&) { return v.kind() == Value::Kind::Int; }},
      {"float", [](const Value& v, Call&) { return v.kind() == Value::Kind::Float; }},
      {"number", [](const Value& v, Call&) { return v.is_number(); }},
      {"string", [](const Value& v, Call&) { return v.is_string(); }},
      {"mapping", [](const Value& v, Call&) { return v.is_dict(); }},
      {"iterable", [](const Value& v, Call&) { return v.is_string() || v.is_list() || v.is_dict(); }},
      {"sequence", [](const Value& v, Call&) { return v.is_string() || v.is_list() || v.is_dict(); }},
      {"callable", [](const Value& v, Call&) { return v.is_callable(); }},
      {"even", [](const Value& v, Call& c) { return integer_parity(v, c, 0); }},
      {"odd", [](const Value& v, Call& c) { return integer_parity(v, c, 1); }},
      {"divisibleby", [](const Value& v, Call& c) {
         const Value n = other(c);
         if (!v.is_integer() || !n.is_integer() || n.as_int() == 0) c.fail("needs integers, the divisor not 0");
         return v.as_int() % n.as_int() == 0;
       }},
      {"eq", [](const Value& v, Call& c) { return equal(v, other(c)); }},
      {"equalto", [](const Value& v, Call& c) { return equal(v, other(c)); }},
      {"==", [](const Value& v, Call& c) { return equal(v, other(c)); }},
      {"ne", [](const Value& v, Call& c) { return !equal(v, other(c)); }},
      {"!=", [](const Value& v, Call& c) { return !equal(v, other(c)); }},
      {"lt", [](const Value& v, Call& c) { return less(v, other(c)); }},
      {"<", [](const Value& v, Call& c) { return less(v, other(c)); }},
      {"lessthan", [](const Value& v, Call& c) { return less(v, other(c)); }},
      {"gt", [](const Value& v, Call& c) { return less(other(c), v); }},
      {">", [](const Value& v, Call& c) { return less(other(c), v); }},
      {"greaterthan", [](const Value& v, Call& c) { return less(other(c), v); }},
      {"le", [](const Value& v, Call& c) { return !less(other(c), v); }},
      {"<=", [](const Value& v, Call& c) { return !less(other(c), v); }},
      {"ge", [](const Value& v, Call& c) { return !less(v, other(c)); }},
      {">=", [](const Value& v, Call& c) { return !less(v, other(c)); }},
      {"in", [](const Value& v, Call& c) { return binary("in", v, other(c), c.budget).as_bool(); }},
      {"sameas", [](const Value& v, Call& c) {
         const Value o = other(c);
         // Python's `is`: the singletons by kind, other values never (each is its own object here).
         return (v.is_none() && o.is_none()) || (v.kind() == Value::Kind::Bool && o.kind() == Value::Kind::Bool && v.as_bool() == o.as_bool());
       }},
      {"lower", [](const Value& v, Call& c) {
         c.expect(0, {});
         const std::string s = to_str(v);
         return s != upper(s) && s == lower(s);
       }},
      {"upper", [](const Value& v, Call& c) {
         c.expect(0, {});
         const std::string s = to_str(v);
         return s != lower(s) && s == upper(s);
       }},
  };
  return t;
}

}  // namespace

bool apply_test(const std::string& name, const Value& subject, Call& c) {
  const auto it = tests().find(name);
  if (it == tests().end()) throw TemplateError("no test named '" + name + "'");
  c.budget.step();
  return it->second(subject, c);
}

}  // namespace accel::chat_template
