#include "engine/chat_template/builtins.h"

#include <cmath>
#include <ctime>

#include "engine/chat_template/call.h"
#include "engine/chat_template/template_error.h"

namespace accel::chat_template {
namespace {

Value range(Call& c) {
  c.expect(3, {});
  if (c.args.empty()) c.fail("needs at least one argument");
  for (const Value& a : c.args) {
    if (!a.is_integer()) c.fail("needs integers, got a " + std::string(a.type_name()));
  }
  const int64_t start = c.args.size() == 1 ? 0 : c.args[0].as_int();
  const int64_t stop = c.args.size() == 1 ? c.args[0].as_int() : c.args[1].as_int();
  const int64_t step = c.args.size() == 3 ? c.args[2].as_int() : 1;
  if (step == 0) c.fail("step must not be zero");
  const double count_d = step > 0 ? (static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)
                                   : (static_cast<double>(start) - static_cast<double>(stop)) / static_cast<double>(-step);
  const std::size_t count = count_d <= 0 ? 0 : static_cast<std::size_t>(std::ceil(count_d));
  // Bounded before anything is made: range(10**9) is refused, not built.
  c.budget.check_size(count * sizeof(Value), "range()'s list");
  c.budget.step(count);
  List out;
  out.reserve(count);
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.emplace_back(i);
  return Value(std::move(out));
}

// dict(d, k=v) and namespace(d, k=v): any keywords.
Dict keywords(Call& c, bool is_namespace) {
  if (c.args.size() > 1) c.fail("takes at most one positional argument");
  Dict d;
  d.is_namespace = is_namespace;
  if (!c.args.empty()) {
    const Value& from = c.args[0];
    if (!from.is_dict()) c.fail("takes a dict as its positional argument, got a " + std::string(from.type_name()));
    d.items = from.as_dict().items;
  }
  for (const auto& [key, value] : c.kwargs) d.set(key, value);
  return d;
}

}  // namespace

Dict builtin_globals(int64_t clock) {
  Dict g;
  g.set("range", Value::function("range", range));
  g.set("dict", Value::function("dict", [](Call& c) { return Value(keywords(c, false)); }));
  g.set("namespace", Value::function("namespace", [](Call& c) { return Value(keywords(c, true)); }));
  g.set("raise_exception", Value::function("raise_exception", [](Call& c) -> Value {
          c.expect(1, {});
          throw TemplateRaised(c.args.empty() ? std::string("raise_exception()") : to_str(c.args[0]));
        }));
  g.set("strftime_now", Value::function("strftime_now", [clock](Call& c) {
          c.expect(1, {});
          const std::string format = c.string_arg(0, "format", "");
          const std::time_t t = static_cast<std::time_t>(clock);
          std::tm local{};
          localtime_r(&t, &local);
          char buf[256];
          const std::size_t n = std::strftime(buf, sizeof buf, format.c_str(), &local);
          if (n == 0 && !format.empty()) c.fail("gave nothing for the format '" + format + "' (or more than 255 bytes)");
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace accel::chat_template
