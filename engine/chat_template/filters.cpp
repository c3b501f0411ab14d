#include "engine/chat_template/filters.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "engine/chat_template/json_text.h"
#include "engine/chat_template/operators.h"
#include "engine/chat_template/python_strings.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

using Filter = Value (*)(const Value& in, Call& c);

std::string text_of(const Value& v) { return to_str(v); }

// `attribute="a.b"` or an index, as Jinja's make_attrgetter.
Value attribute_path(const Value& v, const Value& path) {
  if (path.is_integer()) return item(v, path);
  Value out = v;
  const std::string& p = path.as_string();
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = p.find('.', start);
    const std::string part = p.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    out = numeric ? item(out, Value(static_cast<int64_t>(std::stoll(part)))) : item(out, Value(part));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

// The sort key of Jinja's ignore_case: strings lower-cased.
Value fold(const Value& v, bool case_sensitive) {
  return v.is_string() && !case_sensitive ? Value(lower(v.as_string())) : v;
}

List sequence(const Value& in, const Call& c) {
  if (in.is_dict() || in.is_list() || in.is_string() || in.is_undefined()) return iterate(in);
  c.fail("needs a list, got a " + std::string(in.type_name()));
}

// selectattr / rejectattr / select / reject.
Value select(const Value& in, Call& c, bool by_attribute, bool keep) {
  const List items = sequence(in, c);
  const std::size_t first_test_arg = by_attribute ? 1 : 0;
  const Value attr = by_attribute ? c.arg(0, "attribute") : Value();
  const Value test = c.arg(first_test_arg, "test");
  if (by_attribute && !(attr.is_string() || attr.is_integer())) c.fail("needs an attribute name");
  Call test_call{c.what, {}, {}, c.budget};
  for (std::size_t i = first_test_arg + 1; i < c.args.size(); ++i) test_call.args.push_back(c.args[i]);
  if (!test.is_undefined() && !test.is_string()) c.fail("needs a test name");
  List out;
  for (const Value& v : items) {
    c.budget.step();
    const Value subject = by_attribute ? attribute_path(v, attr) : v;
    const bool passed = test.is_undefined() ? subject.truthy() : apply_test(test.as_string(), subject, test_call);
    if (passed == keep) out.push_back(v);
  }
  return Value(std::move(out));
}

Value map_filter(const Value& in, Call& c) {
  const List items = sequence(in, c);
  List out;
  const Value attr = c.arg(99, "attribute");
  if (!attr.is_undefined()) {
    const Value fallback = c.arg(99, "default");
    for (const Value& v : items) {
      c.budget.step();
      const Value got = attribute_path(v, attr);
      out.push_back(got.is_undefined() && !fallback.is_undefined() ? fallback : got);
    }
    return Value(std::move(out));
  }
  const Value name = c.arg(0, "filter");
  if (!name.is_string()) c.fail("needs a filter name or attribute=");
  Call inner{"filter '" + name.as_string() + "'", {c.args.begin() + 1, c.args.end()}, c.kwargs, c.budget};
  for (const Value& v : items) {
    c.budget.step();
    out.push_back(apply_filter(name.as_string(), v, inner));
  }
  return Value(std::move(out));
}

Value sort_filter(const Value& in, Call& c) {
  c.expect(3, {"reverse", "case_sensitive", "attribute"});
  List items = sequence(in, c);
  const bool reverse = c.bool_arg(0, "reverse", false), case_sensitive = c.bool_arg(1, "case_sensitive", false);
  const Value attr = c.arg(2, "attribute");
  const auto key = [&](const Value& v) { return fold(attr.is_undefined() ? v : attribute_path(v, attr), case_sensitive); };
  c.budget.step(items.size() * 8);
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    return reverse ? less(key(b), key(a)) : less(key(a), key(b));
  });
  return Value(std::move(items));
}

Value dictsort_filter(const Value& in, Call& c) {
  c.expect(3, {"case_sensitive", "by", "reverse"});
  if (!in.is_dict()) c.fail("needs a dict, got a " + std::string(in.type_name()));
  const bool case_sensitive = c.bool_arg(0, "case_sensitive", false), reverse = c.bool_arg(2, "reverse", false);
  const std::string by = c.string_arg(1, "by", "key");
  if (by != "key" && by != "value") c.fail("sorts by 'key' or 'value'");
  List pairs;
  for (const auto& [k, v] : in.as_dict().items) pairs.push_back(Value::tuple({Value(k), v}));
  const std::size_t part = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& a, const Value& b) {
    const Value x = fold(a.as_list()[part], case_sensitive), y = fold(b.as_list()[part], case_sensitive);
    return reverse ? less(y, x) : less(x, y);
  });
  return Value(std::move(pairs));
}

Value unique_filter(const Value& in, Call& c) {
  c.expect(2, {"case_sensitive", "attribute"});
  const bool case_sensitive = c.bool_arg(0, "case_sensitive", false);
  const Value attr = c.arg(1, "attribute");
  List out, seen;
  for (const Value& v : sequence(in, c)) {
    const Value key = fold(attr.is_undefined() ? v : attribute_path(v, attr), case_sensitive);
    c.budget.step(seen.size() + 1);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, key); })) {
      seen.push_back(key);
      out.push_back(v);
    }
  }
  return Value(std::move(out));
}

Value extreme(const Value& in, Call& c, bool largest) {
  c.expect(2, {"case_sensitive", "attribute"});
  const bool case_sensitive = c.bool_arg(0, "case_sensitive", false);
  const Value attr = c.arg(1, "attribute");
  const List items = sequence(in, c);
  if (items.empty()) return Value::undefined("no " + std::string(largest ? "max" : "min") + " of an empty sequence");
  const auto key = [&](const Value& v) { return fold(attr.is_undefined() ? v : attribute_path(v, attr), case_sensitive); };
  const Value* best = &items[0];
  for (const Value& v : items) {
    if (largest ? less(key(*best), key(v)) : less(key(v), key(*best))) best = &v;
  }
  return *best;
}

Value join_filter(const Value& in, Call& c) {
  c.expect(2, {"d", "attribute"});
  const std::string sep = c.string_arg(0, "d", "");
  const Value attr = c.arg(1, "attribute");
  std::string out;
  bool first = true;
  for (const Value& v : sequence(in, c)) {
    if (!first) out += sep;
    first = false;
    out += text_of(attr.is_undefined() ? v : attribute_path(v, attr));
    c.budget.check_size(out.size(), "a joined string");
  }
  return Value(std::move(out));
}

Value tojson_filter(const Value& in, Call& c) {
  c.expect(4, {"indent", "ensure_ascii", "separators", "sort_keys"});
  JsonOptions o;
  const Value indent = c.arg(0, "indent");
  if (indent.is_integer()) {
    o.indent = std::string(static_cast<std::size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
  } else if (indent.is_string()) {
    o.indent = indent.as_string();
  } else if (!indent.is_undefined() && !indent.is_none()) {
    c.fail("needs an integer or string indent");
  }
  o.ensure_ascii = c.bool_arg(1, "ensure_ascii", false);
  const Value separators = c.arg(2, "separators");
  if (separators.is_list() && separators.as_list().size() == 2 && separators.as_list()[0].is_string() &&
      separators.as_list()[1].is_string()) {
    o.item_separator = separators.as_list()[0].as_string();
    o.key_separator = separators.as_list()[1].as_string();
  } else if (!separators.is_undefined() && !separators.is_none()) {
    c.fail("needs separators as a pair of strings");
  }
  o.sort_keys = c.bool_arg(3, "sort_keys", false);
  return Value(to_json(in, o, c.budget));
}

Value indent_filter(const Value& in, Call& c) {
  c.expect(3, {"width", "first", "blank"});
  const Value width = c.arg(0, "width", Value(int64_t{4}));
  const std::string pad = width.is_string() ? width.as_string()
                                            : std::string(static_cast<std::size_t>(std::max<int64_t>(0, c.int_arg(0, "width", 4))), ' ');
  const bool first = c.bool_arg(1, "first", false), blank = c.bool_arg(2, "blank", false);
  const std::string s = text_of(in);
  std::string out;
  std::size_t start = 0;
  bool is_first = true;
  while (true) {
    const std::size_t nl = s.find('\n', start);
    const std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    if ((is_first && first) || (!is_first && (blank || !line.empty()))) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
    c.budget.check_size(out.size(), "an indented string");
  }
  return Value(std::move(out));
}

// Jinja's title: each word (split at spaces, -, (, {, [ and <) capitalized.
Value jinja_title(const Value& in, Call& c) {
  c.expect(0, {});
  const std::string s = text_of(in);
  std::string out, word;
  const auto flush = [&] {
    if (!word.empty()) out += upper(characters(word)[0]) + lower(word.substr(characters(word)[0].size()));
    word.clear();
  };
  for (const char ch : s) {
    if (is_python_space(static_cast<unsigned char>(ch)) || ch == '-' || ch == '(' || ch == '{' || ch == '[' || ch == '<') {
      flush();
      out += ch;
    } else {
      word += ch;
    }
  }
  flush();
  return Value(std::move(out));
}

Value round_filter(const Value& in, Call& c) {
  c.expect(2, {"precision", "method"});
  if (!in.is_number()) c.fail("needs a number, got a " + std::string(in.type_name()));
  const int64_t precision = c.int_arg(0, "precision", 0);
  const std::string how = c.string_arg(1, "method", "common");
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double x = in.as_number() * scale;
  double r;
  if (how == "common") {
    r = std::nearbyint(x);  // Python's round: halves to even
  } else if (how == "floor") {
    r = std::floor(x);
  } else if (how == "ceil") {
    r = std::ceil(x);
  } else {
    c.fail("method must be 'common', 'ceil' or 'floor'");
  }
  return Value(r / scale);
}

Value int_filter(const Value& in, Call& c) {
  c.expect(2, {"default", "base"});
  const Value fallback = c.arg(0, "default", Value(int64_t{0}));
  if (in.is_integer()) return Value(in.as_int());
  if (in.is_number()) return Value(static_cast<int64_t>(in.as_number()));
  if (!in.is_string()) return fallback;
  const std::string s = strip(in.as_string(), std::nullopt, true, true);
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, static_cast<int>(c.int_arg(1, "base", 10)));
  if (!s.empty() && end && *end == '\0') return Value(static_cast<int64_t>(v));
  const double d = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' ? Value(static_cast<int64_t>(d)) : fallback;
}

Value float_filter(const Value& in, Call& c) {
  c.expect(1, {"default"});
  if (in.is_number()) return Value(in.as_number());
  if (in.is_string()) {
    const std::string s = strip(in.as_string(), std::nullopt, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(d);
  }
  return c.arg(0, "default", Value(0.0));
}

Value escape(const Value& in, Call&) {
  std::string out;
  for (const char ch : text_of(in)) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return Value(std::move(out));
}

Value length(const Value& in, Call& c) {
  c.expect(0, {});
  switch (in.kind()) {
    case Value::Kind::Undefined: return Value(int64_t{0});
    case Value::Kind::String: return Value(static_cast<int64_t>(char_count(in.as_string())));
    case Value::Kind::List: return Value(static_cast<int64_t>(in.as_list().size()));
    case Value::Kind::Dict: return Value(static_cast<int64_t>(in.as_dict().items.size()));
    default: c.fail("needs a string, list or dict, got a " + std::string(in.type_name()));
  }
}

Value default_filter(const Value& in, Call& c) {
  c.expect(2, {"default_value", "boolean"});
  const bool boolean = c.bool_arg(1, "boolean", false);
  if (in.is_undefined() || (boolean && !in.truthy())) return c.arg(0, "default_value", Value(""));
  return in;
}

Value end_item(const Value& in, Call& c, bool last) {
  c.expect(0, {});
  const List items = sequence(in, c);
  if (items.empty()) return Value::undefined(std::string("no ") + (last ? "last" : "first") + " item of an empty sequence");
  return last ? items.back() : items.front();
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> f = {
      {"abs", [](const Value& in, Call& c) { c.expect(0, {}); return negate(in, in.is_number() && in.as_number() < 0); }},
      {"attr", [](const Value& in, Call& c) { c.expect(1, {}); return attribute(in, c.string_arg(0, "name", "")); }},
      {"capitalize", [](const Value& in, Call& c) { c.expect(0, {}); return Value(capitalize(text_of(in))); }},
      {"center", [](const Value& in, Call& c) {
         c.expect(1, {"width"});
         const std::string s = text_of(in);
         const int64_t width = c.int_arg(0, "width", 80), n = static_cast<int64_t>(char_count(s));
         if (width <= n) return Value(s);
         c.budget.check_size(static_cast<std::size_t>(width), "a centered string");
         const int64_t total = width - n, left = total / 2 + (total & width & 1);  // Python's str.center
         return Value(std::string(static_cast<std::size_t>(left), ' ') + s + std::string(static_cast<std::size_t>(total - left), ' '));
       }},
      {"count", length},
      {"d", default_filter},
      {"default", default_filter},
      {"dictsort", dictsort_filter},
      {"e", escape},
      {"escape", escape},
      {"first", [](const Value& in, Call& c) { return end_item(in, c, false); }},
      {"float", float_filter},
      {"indent", indent_filter},
      {"int", int_filter},
      {"items", [](const Value& in, Call& c) {
         c.expect(0, {});
         if (in.is_undefined()) return Value(List{});
         if (!in.is_dict()) c.fail("needs a dict, got a " + std::string(in.type_name()));
         List out;
         for (const auto& [k, v] : in.as_dict().items) out.push_back(Value::tuple({Value(k), v}));
         return Value(std::move(out));
       }},
      {"join", join_filter},
      {"last", [](const Value& in, Call& c) { return end_item(in, c, true); }},
      {"length", length},
      {"list", [](const Value& in, Call& c) { c.expect(0, {}); return Value(sequence(in, c)); }},
      {"lower", [](const Value& in, Call& c) { c.expect(0, {}); return Value(lower(text_of(in))); }},
      {"map", map_filter},
      {"max", [](const Value& in, Call& c) { return extreme(in, c, true); }},
      {"min", [](const Value& in, Call& c) { return extreme(in, c, false); }},
      {"reject", [](const Value& in, Call& c) { return select(in, c, false, false); }},
      {"rejectattr", [](const Value& in, Call& c) { return select(in, c, true, false); }},
      {"replace", [](const Value& in, Call& c) {
         c.expect(3, {"old", "new", "count"});
         std::string out = replace(text_of(in), c.string_arg(0, "old", ""), c.string_arg(1, "new", ""), c.int_arg(2, "count", -1));
         c.budget.check_size(out.size(), "a replaced string");
         return Value(std::move(out));
       }},
      {"reverse", [](const Value& in, Call& c) {
         c.expect(0, {});
         List items = sequence(in, c);
         std::reverse(items.begin(), items.end());
         if (!in.is_string()) return Value(std::move(items));
         std::string out;
         for (const Value& ch : items) out += ch.as_string();
         return Value(std::move(out));
       }},
      {"round", round_filter},
      {"safe", [](const Value& in, Call& c) { c.expect(0, {}); return in; }},
      {"select", [](const Value& in, Call& c) { return select(in, c, false, true); }},
      {"selectattr", [](const Value& in, Call& c) { return select(in, c, true, true); }},
      {"sort", sort_filter},
      {"string", [](const Value& in, Call& c) { c.expect(0, {}); return Value(text_of(in)); }},
      {"sum", [](const Value& in, Call& c) {
         c.expect(2, {"attribute", "start"});
         const Value attr = c.arg(0, "attribute");
         Value total = c.arg(1, "start", Value(int64_t{0}));
         for (const Value& v : sequence(in, c)) total = binary("+", total, attr.is_undefined() ? v : attribute_path(v, attr), c.budget);
         return total;
       }},
      {"title", jinja_title},
      {"tojson", tojson_filter},
      {"trim", [](const Value& in, Call& c) {
         c.expect(1, {"chars"});
         const Value chars = c.arg(0, "chars");
         return Value(strip(text_of(in), chars.is_string() ? std::optional<std::string>(chars.as_string()) : std::nullopt, true, true));
       }},
      {"unique", unique_filter},
      {"upper", [](const Value& in, Call& c) { c.expect(0, {}); return Value(upper(text_of(in))); }},
      {"wordcount", [](const Value& in, Call& c) { c.expect(0, {}); return Value(static_cast<int64_t>(split(text_of(in), std::nullopt, -1, false).size())); }},
  };
  return f;
}

}  // namespace

Value apply_filter(const std::string& name, const Value& input, Call& c) {
  const auto it = filters().find(name);
  if (it == filters().end()) throw TemplateError("no filter named '" + name + "'");
  c.budget.step();
  return it->second(input, c);
}

}  // namespace accel::chat_template
