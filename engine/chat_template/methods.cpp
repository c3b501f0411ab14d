#include "engine/chat_template/methods.h"

#include <map>

#include "engine/chat_template/call.h"
#include "engine/chat_template/python_strings.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

using Method = Value (*)(const Value& self, Call& c);

std::optional<std::string> optional_string(const Call& c, std::size_t i, const char* name) {
  const Value v = c.arg(i, name);
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) c.fail("needs a string, got a " + std::string(v.type_name()));
  return v.as_string();
}

Value strings(std::vector<std::string> parts) {
  List out;
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value(std::move(out));
}

// startswith / endswith: a string or a tuple of them.
bool affix(const std::string& s, const Value& which, bool prefix, const Call& c) {
  const List options = which.is_list() ? which.as_list() : List{which};
  for (const Value& o : options) {
    if (!o.is_string()) c.fail("needs a string or a tuple of strings, got a " + std::string(o.type_name()));
    const std::string& a = o.as_string();
    if (a.size() <= s.size() && s.compare(prefix ? 0 : s.size() - a.size(), a.size(), a) == 0) return true;
  }
  return false;
}

Value strip_method(const Value& self, Call& c, bool left, bool right) {
  c.expect(1, {"chars"});
  return Value(strip(self.as_string(), optional_string(c, 0, "chars"), left, right));
}

Value split_method(const Value& self, Call& c, bool from_right) {
  c.expect(2, {"sep", "maxsplit"});
  const std::optional<std::string> sep = optional_string(c, 0, "sep");
  if (sep && sep->empty()) c.fail("got an empty separator");
  return strings(split(self.as_string(), sep, c.int_arg(1, "maxsplit", -1), from_right));
}

Value find_method(const Value& self, Call& c, bool from_right) {
  c.expect(1, {});
  const std::string needle = c.string_arg(0, "sub", "");
  const std::string& s = self.as_string();
  const std::size_t at = from_right ? s.rfind(needle) : s.find(needle);
  if (at == std::string::npos) return Value(int64_t{-1});
  return Value(static_cast<int64_t>(char_count(s.substr(0, at))));
}

Value character_test(const Value& self, Call& c, bool (*test)(char32_t)) {
  c.expect(0, {});
  return Value(all_characters(self.as_string(), test));
}

const std::map<std::string, Method>& string_methods() {
  static const std::map<std::string, Method> m = {
      {"strip", [](const Value& s, Call& c) { return strip_method(s, c, true, true); }},
      {"lstrip", [](const Value& s, Call& c) { return strip_method(s, c, true, false); }},
      {"rstrip", [](const Value& s, Call& c) { return strip_method(s, c, false, true); }},
      {"split", [](const Value& s, Call& c) { return split_method(s, c, false); }},
      {"rsplit", [](const Value& s, Call& c) { return split_method(s, c, true); }},
      {"splitlines", [](const Value& s, Call& c) { c.expect(0, {}); return strings(splitlines(s.as_string())); }},
      {"startswith", [](const Value& s, Call& c) { c.expect(1, {}); return Value(affix(s.as_string(), c.arg(0, ""), true, c)); }},
      {"endswith", [](const Value& s, Call& c) { c.expect(1, {}); return Value(affix(s.as_string(), c.arg(0, ""), false, c)); }},
      {"upper", [](const Value& s, Call& c) { c.expect(0, {}); return Value(upper(s.as_string())); }},
      {"lower", [](const Value& s, Call& c) { c.expect(0, {}); return Value(lower(s.as_string())); }},
      {"title", [](const Value& s, Call& c) { c.expect(0, {}); return Value(title(s.as_string())); }},
      {"capitalize", [](const Value& s, Call& c) { c.expect(0, {}); return Value(capitalize(s.as_string())); }},
      {"replace", [](const Value& s, Call& c) {
         c.expect(3, {"count"});
         const std::string from = c.string_arg(0, "old", ""), to = c.string_arg(1, "new", "");
         std::string out = replace(s.as_string(), from, to, c.int_arg(2, "count", -1));
         c.budget.check_size(out.size(), "a replaced string");
         return Value(std::move(out));
       }},
      {"find", [](const Value& s, Call& c) { return find_method(s, c, false); }},
      {"rfind", [](const Value& s, Call& c) { return find_method(s, c, true); }},
      {"count", [](const Value& s, Call& c) {
         c.expect(1, {});
         const std::string needle = c.string_arg(0, "sub", "");
         if (needle.empty()) return Value(static_cast<int64_t>(char_count(s.as_string()) + 1));
         int64_t n = 0;
         for (std::size_t at = s.as_string().find(needle); at != std::string::npos; at = s.as_string().find(needle, at + needle.size())) ++n;
         return Value(n);
       }},
      {"join", [](const Value& s, Call& c) {
         c.expect(1, {});
         std::string out;
         const Value items = c.arg(0, "iterable");
         if (!items.is_list()) c.fail("needs a list, got a " + std::string(items.type_name()));
         for (std::size_t i = 0; i < items.as_list().size(); ++i) {
           const Value& v = items.as_list()[i];
           if (!v.is_string()) c.fail("item " + std::to_string(i) + " is a " + v.type_name() + ", not a string");
           if (i) out += s.as_string();
           out += v.as_string();
           c.budget.check_size(out.size(), "a joined string");
         }
         return Value(std::move(out));
       }},
      {"removeprefix", [](const Value& s, Call& c) {
         c.expect(1, {});
         const std::string p = c.string_arg(0, "prefix", "");
         const std::string& t = s.as_string();
         return Value(t.compare(0, p.size(), p) == 0 ? t.substr(p.size()) : t);
       }},
      {"removesuffix", [](const Value& s, Call& c) {
         c.expect(1, {});
         const std::string p = c.string_arg(0, "suffix", "");
         const std::string& t = s.as_string();
         return Value(!p.empty() && p.size() <= t.size() && t.compare(t.size() - p.size(), p.size(), p) == 0 ? t.substr(0, t.size() - p.size()) : t);
       }},
      {"isdigit", [](const Value& s, Call& c) { return character_test(s, c, is_digit); }},
      {"isalpha", [](const Value& s, Call& c) { return character_test(s, c, is_alpha); }},
      {"isalnum", [](const Value& s, Call& c) { return character_test(s, c, is_alnum); }},
      {"isspace", [](const Value& s, Call& c) { return character_test(s, c, is_python_space); }},
      {"isupper", [](const Value& s, Call& c) { c.expect(0, {}); return Value(s.as_string() != lower(s.as_string()) && s.as_string() == upper(s.as_string())); }},
      {"islower", [](const Value& s, Call& c) { c.expect(0, {}); return Value(s.as_string() != upper(s.as_string()) && s.as_string() == lower(s.as_string())); }},
  };
  return m;
}

Value dict_items(const Value& self, Call& c) {
  c.expect(0, {});
  List out;
  for (const auto& [key, value] : self.as_dict().items) out.push_back(Value::tuple({Value(key), value}));
  return Value(std::move(out));
}

const std::map<std::string, Method>& dict_methods() {
  static const std::map<std::string, Method> m = {
      {"items", dict_items},
      {"keys", [](const Value& d, Call& c) {
         c.expect(0, {});
         List out;
         for (const auto& item : d.as_dict().items) out.emplace_back(item.first);
         return Value(std::move(out));
       }},
      {"values", [](const Value& d, Call& c) {
         c.expect(0, {});
         List out;
         for (const auto& item : d.as_dict().items) out.push_back(item.second);
         return Value(std::move(out));
       }},
      {"get", [](const Value& d, Call& c) {
         c.expect(2, {});
         const Value key = c.arg(0, "key");
         const Value* v = key.is_string() ? d.as_dict().find(key.as_string()) : nullptr;
         return v ? *v : c.arg(1, "default", Value::none());
       }},
  };
  return m;
}

const std::map<std::string, Method>& list_methods() {
  static const std::map<std::string, Method> m = {
      {"index", [](const Value& l, Call& c) {
         c.expect(1, {});
         const Value x = c.arg(0, "value");
         for (std::size_t i = 0; i < l.as_list().size(); ++i) {
           if (equal(l.as_list()[i], x)) return Value(static_cast<int64_t>(i));
         }
         c.fail(to_repr(x) + " is not in the list");
       }},
      {"count", [](const Value& l, Call& c) {
         c.expect(1, {});
         const Value x = c.arg(0, "value");
         int64_t n = 0;
         for (const Value& v : l.as_list()) n += equal(v, x);
         return Value(n);
       }},
  };
  return m;
}

}  // namespace

std::optional<Value> method(const Value& obj, const std::string& name) {
  const std::map<std::string, Method>* table = obj.is_string() ? &string_methods()
                                               : obj.is_dict() ? &dict_methods()
                                               : obj.is_list() ? &list_methods()
                                                               : nullptr;
  if (!table) return std::nullopt;
  const auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  const Method m = it->second;
  return Value::function(std::string(obj.type_name()) + "." + name, [obj, m](Call& c) { return m(obj, c); });
}

}  // namespace accel::chat_template
