#include "engine/chat_template/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/chat_template/template_error.h"
#include "engine/tokenizers/utf8.h"

namespace accel::chat_template {

Value::Value(Dict dict) : kind_(Kind::Dict), dict_(std::make_shared<Dict>(std::move(dict))) {}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::undefined(std::string why) {
  Value v;
  v.note_ = std::move(why);
  return v;
}

Value Value::tuple(List items) {
  Value v(std::move(items));
  v.tuple_ = true;
  return v;
}

Value Value::function(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::Callable;
  v.function_ = std::make_shared<const Function>(std::move(fn));
  v.note_ = std::move(name);
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
    case Kind::Int:
      return int_ != 0;
    case Kind::Float:
      return float_ != 0;
    case Kind::String:
      return !string_->empty();
    case Kind::List:
      return !list_->empty();
    case Kind::Dict:
      return !dict_->items.empty();
    case Kind::Callable:
      return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::Undefined: return "undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return dict_->is_namespace ? "Namespace" : "dict";
    case Kind::Callable: return "function";
  }
  return "?";
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& item : items) {
    if (item.first == key) return &item.second;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value value) {
  for (auto& item : items) {
    if (item.first == key) {
      item.second = std::move(value);
      return;
    }
  }
  items.emplace_back(key, std::move(value));
}

std::string float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Python's repr: the shortest round-tripping digits, then 'r' formatting
  // (scientific below 1e-4 and from 1e16).
  char digits[32];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(digits, sizeof digits, "%.*e", precision - 1, v);
    if (std::strtod(digits, nullptr) == v) break;
  }
  const char* e = std::strchr(digits, 'e');
  const int exponent = std::atoi(e + 1);
  std::string mantissa;
  for (const char* p = digits; p < e; ++p) {
    if (*p >= '0' && *p <= '9') mantissa += *p;
  }
  while (mantissa.size() > 1 && mantissa.back() == '0') mantissa.pop_back();
  const std::string sign = v < 0 ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    std::string out = sign + mantissa.substr(0, 1);
    if (mantissa.size() > 1) out += "." + mantissa.substr(1);
    char tail[8];
    std::snprintf(tail, sizeof tail, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + tail;
  }
  if (exponent < 0) return sign + "0." + std::string(-exponent - 1, '0') + mantissa;
  const std::size_t point = static_cast<std::size_t>(exponent) + 1;
  if (mantissa.size() <= point) return sign + mantissa + std::string(point - mantissa.size(), '0') + ".0";
  return sign + mantissa.substr(0, point) + "." + mantissa.substr(point);
}

namespace {

std::string string_repr(const std::string& s) {
  const bool double_quotes = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out + quote;
}

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String:
      return string_repr(v.as_string());
    case Value::Kind::List: {
      std::string out = v.is_tuple() ? "(" : "[";
      for (std::size_t i = 0; i < v.as_list().size(); ++i) out += (i ? ", " : "") + to_repr(v.as_list()[i]);
      if (v.is_tuple()) return out + (v.as_list().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Value::Kind::Dict: {
      std::string out = v.as_dict().is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, value] : v.as_dict().items) {
        out += (first ? "" : ", ") + string_repr(key) + ": " + to_repr(value);
        first = false;
      }
      return out + (v.as_dict().is_namespace ? "}>" : "}");
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return float_repr(v.as_number());
    case Value::Kind::String: return v.as_string();
    case Value::Kind::Callable: return "<function " + v.note() + ">";
    default: return to_repr(v);
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() == b.as_int();
    return a.as_number() == b.as_number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return true;
    case Value::Kind::String:
      return a.as_string() == b.as_string();
    case Value::Kind::List: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i) {
        if (!equal(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, value] : x.items) {
        const Value* other = y.find(key);
        if (!other || !equal(value, *other)) return false;
      }
      return true;
    }
    default:
      return &a.as_function() == &b.as_function();
  }
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_integer() && b.is_integer()) return a.as_int() < b.as_int();
    return a.as_number() < b.as_number();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 bytes sort as code points
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (std::size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  throw TemplateError(std::string("'<' not supported between a ") + a.type_name() + " and a " + b.type_name());
}

std::size_t char_count(const std::string& s) {
  std::size_t n = 0;
  for (const char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = tokenizers::utf8_char_length(static_cast<unsigned char>(s[i]));
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace accel::chat_template
