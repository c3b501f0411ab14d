#include "engine/chat_template/operators.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "engine/chat_template/methods.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

// a op b on int64, refused on overflow (Python's ints would grow).
template <typename F>
int64_t checked(F overflows, int64_t a, int64_t b, const std::string& op) {
  int64_t r = 0;
  if (overflows(a, b, &r)) throw TemplateError("integer overflow in " + op);
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw TemplateError("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) throw TemplateError("integer overflow in //");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t int_power(int64_t base, int64_t exponent) {
  int64_t result = 1;
  for (int64_t i = 0; i < exponent; ++i) {
    if (__builtin_mul_overflow(result, base, &result)) throw TemplateError("integer overflow in **");
    if (result == 0 || result == 1) break;
  }
  return result;
}

Value repeat(const Value& seq, int64_t times, Budget& budget) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    budget.check_size(s.size() * static_cast<std::size_t>(times), "a repeated string");
    budget.step(static_cast<uint64_t>(times));
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const List& l = seq.as_list();
  budget.check_size(l.size() * static_cast<std::size_t>(times), "a repeated list");
  budget.step(l.size() * static_cast<uint64_t>(times));
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), l.begin(), l.end());
  return Value(std::move(out));
}

// A conversion's flags, width and precision, as Python's % reads them
// ("%-8.3s"): flags from "-+ #0", then digits, then '.' and digits. A
// width or precision is at most kMaxFormatWidth: the C library formats a
// width of 2e9 in full before cutting it to its buffer (seconds a call).
struct FormatSpec {
  std::string flags;
  int width = -1;
  int precision = -1;
};

constexpr int kMaxFormatWidth = 400;

int format_number(const std::string& spec, std::size_t& at, const char* what) {
  int n = 0;
  const std::size_t first = at;
  while (at < spec.size() && spec[at] >= '0' && spec[at] <= '9') {
    n = n * 10 + (spec[at++] - '0');
    if (n > kMaxFormatWidth) {
      throw TemplateError(std::string("a % format's ") + what + " may be at most " +
                          std::to_string(kMaxFormatWidth));
    }
  }
  return at > first ? n : -1;
}

FormatSpec parse_spec(const std::string& spec) {  // `spec` without its '%' and conversion
  FormatSpec out;
  std::size_t at = 0;
  while (at < spec.size() && std::string("-+ #0").find(spec[at]) != std::string::npos) out.flags += spec[at++];
  out.width = format_number(spec, at, "width");
  if (at < spec.size() && spec[at] == '.') {
    ++at;
    out.precision = std::max(format_number(spec, at, "precision"), 0);
  }
  if (at != spec.size()) throw TemplateError("an unsupported % format '%" + spec + "'");
  return out;
}

// Python's "%<spec>s" of `text`: cut to the precision, padded to the width,
// both counted in characters (UTF-8 sequences), not bytes.
std::string format_text(const std::string& text, const FormatSpec& spec) {
  std::size_t end = text.size(), characters = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (spec.precision >= 0 && characters == static_cast<std::size_t>(spec.precision)) {
      end = i;
      break;
    }
    ++characters;
  }
  std::string out = text.substr(0, end);
  if (spec.width > static_cast<int>(characters)) {
    const std::string pad(static_cast<std::size_t>(spec.width) - characters, ' ');
    out = spec.flags.find('-') != std::string::npos ? out + pad : pad + out;
  }
  return out;
}

// printf-style `"%s and %d" % (a, b)`: s r d i f e g and %%.
std::string percent_format(const std::string& format, const Value& args) {
  const List values = args.is_tuple() ? args.as_list() : List{args};  // a tuple gives the arguments, anything else is one
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') {
      out += format[i];
      continue;
    }
    std::size_t k = i + 1;
    while (k < format.size() && std::string("-+ 0#.0123456789").find(format[k]) != std::string::npos) ++k;
    if (k >= format.size()) throw TemplateError("an incomplete % format");
    const std::string spec = format.substr(i + 1, k - i - 1);
    const FormatSpec parsed = parse_spec(spec);
    const char conversion = format[k];
    i = k;
    if (conversion == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw TemplateError("not enough arguments for the % format");
    const Value& v = values[next++];
    // Widths and precisions are bounded above, so a number fits.
    char buf[2 * kMaxFormatWidth + 64];
    if (conversion == 's' || conversion == 'r') {
      out += format_text(conversion == 's' ? to_str(v) : to_repr(v), parsed);
    } else if ((conversion == 'd' || conversion == 'i') && v.is_number()) {
      std::snprintf(buf, sizeof buf, ("%" + spec + "lld").c_str(), static_cast<long long>(v.is_integer() ? v.as_int() : static_cast<int64_t>(v.as_number())));
      out += buf;
    } else if ((conversion == 'f' || conversion == 'e' || conversion == 'g') && v.is_number()) {
      std::snprintf(buf, sizeof buf, ("%" + spec + conversion).c_str(), v.as_number());
      out += buf;
    } else {
      throw TemplateError(std::string("the % format '%") + conversion + "' does not take a " + v.type_name());
    }
  }
  if (next < values.size()) throw TemplateError("not all arguments converted by the % format");
  return out;
}

bool contains(const Value& container, const Value& x) {
  switch (container.kind()) {
    case Value::Kind::Undefined:
      return false;
    case Value::Kind::String:
      if (!x.is_string()) throw TemplateError(std::string("'in <string>' needs a string on the left, not a ") + x.type_name());
      return container.as_string().find(x.as_string()) != std::string::npos;
    case Value::Kind::List:
      for (const Value& v : container.as_list()) {
        if (equal(v, x)) return true;
      }
      return false;
    case Value::Kind::Dict:
      return x.is_string() && container.as_dict().find(x.as_string()) != nullptr;
    default:
      throw TemplateError(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

}  // namespace

void require_defined(const Value& v, const char* use) {
  if (v.is_undefined()) {
    throw TemplateError((v.note().empty() ? std::string("an undefined value") : v.note()) + " (" + use + ")");
  }
}

Value binary(const std::string& op, const Value& a, const Value& b, Budget& budget) {
  if (op == "~") {
    std::string out = to_str(a);
    const std::string right = to_str(b);
    budget.check_size(out.size() + right.size(), "a string made with ~");
    return Value(out += right);
  }
  if (op == "==") return Value(equal(a, b));
  if (op == "!=") return Value(!equal(a, b));
  if (op == "in") return Value(contains(b, a));
  if (op == "not in") return Value(!contains(b, a));
  require_defined(a, op.c_str());
  require_defined(b, op.c_str());
  if (op == "<") return Value(less(a, b));
  if (op == ">") return Value(less(b, a));
  if (op == "<=") return Value(!less(b, a));
  if (op == ">=") return Value(!less(a, b));
  const bool ints = a.is_integer() && b.is_integer();
  const bool numbers = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) return Value(checked([](int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }, a.as_int(), b.as_int(), op));
    if (numbers) return Value(a.as_number() + b.as_number());
    if (a.is_string() && b.is_string()) return binary("~", a, b, budget);
    if (a.is_list() && b.is_list()) {
      budget.check_size(a.as_list().size() + b.as_list().size(), "a list made with +");
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(checked([](int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }, a.as_int(), b.as_int(), op));
    if (numbers) return Value(a.as_number() - b.as_number());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(checked([](int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }, a.as_int(), b.as_int(), op));
    if (numbers) return Value(a.as_number() * b.as_number());
    if ((a.is_string() || a.is_list()) && b.is_integer()) return repeat(a, b.as_int(), budget);
    if ((b.is_string() || b.is_list()) && a.is_integer()) return repeat(b, a.as_int(), budget);
    unsupported(op, a, b);
  }
  if (op == "%" && a.is_string()) return Value(percent_format(a.as_string(), b));
  if (!numbers) unsupported(op, a, b);
  if (op == "/") {
    if (b.as_number() == 0) throw TemplateError("division by zero");
    return Value(a.as_number() / b.as_number());
  }
  if (op == "//") {
    if (ints) return Value(floor_div(a.as_int(), b.as_int()));
    if (b.as_number() == 0) throw TemplateError("float floor division by zero");
    return Value(std::floor(a.as_number() / b.as_number()));
  }
  if (op == "%") {
    if (ints) return Value(a.as_int() - floor_div(a.as_int(), b.as_int()) * b.as_int());
    if (b.as_number() == 0) throw TemplateError("float modulo by zero");
    const double m = std::fmod(a.as_number(), b.as_number());
    return Value(m != 0 && ((m < 0) != (b.as_number() < 0)) ? m + b.as_number() : m);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) return Value(int_power(a.as_int(), b.as_int()));
    return Value(std::pow(a.as_number(), b.as_number()));
  }
  throw TemplateError("unknown operator " + op);
}

Value negate(const Value& a, bool minus) {
  require_defined(a, minus ? "unary -" : "unary +");
  if (!a.is_number()) throw TemplateError(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + a.type_name() + "'");
  if (!minus) return a.is_integer() ? Value(a.as_int()) : a;
  if (a.is_integer()) {
    if (a.as_int() == std::numeric_limits<int64_t>::min()) throw TemplateError("integer overflow in unary -");
    return Value(-a.as_int());
  }
  return Value(-a.as_number());
}

namespace {

[[noreturn]] void sandboxed(const Value& obj, const std::string& name) {
  throw TemplateError("access to attribute '" + name + "' of a " + obj.type_name() +
                      " is not allowed: a template reaches only the data it was given");
}

}  // namespace

Value attribute(const Value& obj, const std::string& name) {
  require_defined(obj, ("its attribute '" + name + "' was asked for").c_str());
  if (obj.is_dict()) {
    if (!obj.as_dict().is_namespace) {
      if (auto m = method(obj, name)) return *m;
    }
    if (const Value* v = obj.as_dict().find(name)) return *v;
    if (!name.empty() && name[0] == '_') sandboxed(obj, name);
    return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute '" + name + "'");
  }
  if (!name.empty() && name[0] == '_') sandboxed(obj, name);
  if (auto m = method(obj, name)) return *m;
  return Value::undefined("'" + std::string(obj.type_name()) + " object' has no attribute '" + name + "'");
}

Value item(const Value& obj, const Value& key) {
  require_defined(obj, ("an item was asked for with " + to_repr(key)).c_str());
  if (obj.is_dict() && key.is_string()) {
    if (const Value* v = obj.as_dict().find(key.as_string())) return *v;
    if (!obj.as_dict().is_namespace) {
      if (auto m = method(obj, key.as_string())) return *m;
    }
    return Value::undefined("'dict object' has no attribute " + to_repr(key));
  }
  if ((obj.is_list() || obj.is_string()) && key.is_integer()) {
    const bool is_list = obj.is_list();
    std::vector<std::string> chars;
    if (!is_list) chars = characters(obj.as_string());
    const int64_t n = static_cast<int64_t>(is_list ? obj.as_list().size() : chars.size());
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined(std::string(obj.type_name()) + " index " + std::to_string(key.as_int()) + " out of range");
    return is_list ? obj.as_list()[static_cast<std::size_t>(i)] : Value(chars[static_cast<std::size_t>(i)]);
  }
  if (key.is_string()) return attribute(obj, key.as_string());
  return Value::undefined("'" + std::string(obj.type_name()) + " object' has no item " + to_repr(key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, Budget& budget) {
  require_defined(obj, "it was sliced");
  if (!obj.is_list() && !obj.is_string()) throw TemplateError(std::string("a ") + obj.type_name() + " cannot be sliced");
  const auto index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_integer()) throw TemplateError(std::string("slice ") + what + " must be an integer, got a " + v.type_name());
    return v.as_int();
  };
  std::vector<std::string> chars;
  if (obj.is_string()) chars = characters(obj.as_string());
  const int64_t n = static_cast<int64_t>(obj.is_list() ? obj.as_list().size() : chars.size());
  const int64_t s = index(step, "step").value_or(1);
  if (s == 0) throw TemplateError("slice step cannot be zero");
  // Python's PySlice_AdjustIndices.
  const auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= n) {
      i = s < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t from = adjust(index(start, "start"), s < 0 ? n - 1 : 0);
  const int64_t to = adjust(index(stop, "stop"), s < 0 ? -1 : n);
  List items;
  std::string text;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) {
    budget.step();
    if (obj.is_list()) {
      items.push_back(obj.as_list()[static_cast<std::size_t>(i)]);
    } else {
      text += chars[static_cast<std::size_t>(i)];
    }
  }
  return obj.is_list() ? Value(std::move(items)) : Value(std::move(text));
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
      return {};
    case Value::Kind::List:
      return v.as_list();
    case Value::Kind::String: {
      List out;
      for (auto& c : characters(v.as_string())) out.emplace_back(std::move(c));
      return out;
    }
    case Value::Kind::Dict: {
      List out;
      for (const auto& item : v.as_dict().items) out.emplace_back(item.first);
      return out;
    }
    default:
      throw TemplateError(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

}  // namespace accel::chat_template
