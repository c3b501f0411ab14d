// What every filter, test, method and global receives: its arguments
// (positional and keyword, read by position or name as Python binds them)
// and the render's budget, which bounds the work and the size of anything
// the template makes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat_template/value.h"

namespace accel::chat_template {

// The sandbox's bounds on one render.
struct Limits {
  std::size_t max_output_bytes = std::size_t{64} << 20;  // the text, and any one string or list made
  uint64_t max_steps = 5'000'000;  // expressions evaluated, loop turns, items made: seconds of work
  int max_call_depth = 100;         // macros calling macros
};

class Budget {
 public:
  explicit Budget(const Limits& limits) : limits_(limits) {}
  // Counts `n` units of work; throws TemplateError past the limit.
  void step(uint64_t n = 1);
  // Refuses a string of `bytes` (or a list of that many items) past the size limit.
  void check_size(std::size_t bytes, const char* what) const;
  const Limits& limits() const { return limits_; }

 private:
  Limits limits_;
  uint64_t steps_ = 0;
};

using Kwargs = std::vector<std::pair<std::string, Value>>;

struct Call {
  std::string what;  // "filter 'join'", for errors
  std::vector<Value> args;
  Kwargs kwargs;
  Budget& budget;

  // Argument `i` (0-based, after the input of a filter) or keyword `name`;
  // `fallback` when neither is given.
  Value arg(std::size_t i, const char* name, Value fallback = Value()) const;
  // Refuses more than `positional` arguments and keywords outside `names`.
  void expect(std::size_t positional, std::initializer_list<const char*> names) const;
  [[noreturn]] void fail(const std::string& message) const;
  std::string string_arg(std::size_t i, const char* name, const std::string& fallback) const;
  int64_t int_arg(std::size_t i, const char* name, int64_t fallback) const;
  bool bool_arg(std::size_t i, const char* name, bool fallback) const;
};

}  // namespace accel::chat_template
