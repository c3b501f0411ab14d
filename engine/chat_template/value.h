// The values a chat template computes with, as Jinja2 sees Python's: none,
// booleans, integers, floats, strings (UTF-8; lengths, indices and slices
// count characters), lists, dicts (string keys, kept in the order they were
// given: accel's Lua tables arrive sorted, bindings/chat_template_ops.cpp)
// and callables (macros, builtins, bound methods). Undefined is a value too,
// as in Jinja: printed empty, false, iterated as empty, an error only when
// something is asked of it (an attribute, arithmetic, a call).
// Printing and comparing follow Python: True/False/None, 1.0, ['a', 1].
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace accel::chat_template {

class Value;
using List = std::vector<Value>;
struct Dict;
struct Call;
using Function = std::function<Value(Call&)>;

class Value {
 public:
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict, Callable };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int v) : kind_(Kind::Int), int_(v) {}
  Value(int64_t v) : kind_(Kind::Int), int_(v) {}
  Value(double v) : kind_(Kind::Float), float_(v) {}
  Value(std::string s) : kind_(Kind::String), string_(std::make_shared<std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List list) : kind_(Kind::List), list_(std::make_shared<List>(std::move(list))) {}
  Value(Dict dict);

  static Value none();
  // An undefined value saying what is missing ("'foo' is undefined").
  static Value undefined(std::string why);
  // A tuple: a list that prints as Python's (a, b) (dict items, tuple literals).
  static Value tuple(List items);
  // A callable named `name` (for errors and printing).
  static Value function(std::string name, Function fn);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_tuple() const { return tuple_; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_callable() const { return kind_ == Kind::Callable; }
  // Python's int (bool included) and float.
  bool is_integer() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }
  bool is_number() const { return is_integer() || kind_ == Kind::Float; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_number() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& as_string() const { return *string_; }
  const List& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& mutable_dict() const { return *dict_; }  // namespaces only (the evaluator checks)
  const Function& as_function() const { return *function_; }
  // What undefined stands for, or a callable's name.
  const std::string& note() const { return note_; }

  // Python's bool(): empty strings, lists and dicts, 0, None, undefined are false.
  bool truthy() const;
  // The type name errors give ("str", "list", "dict", "undefined").
  const char* type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> string_;
  std::shared_ptr<const List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Function> function_;
  std::string note_;
  bool tuple_ = false;
};

// A dict: its items in order. Lookups are linear: the dicts of chat
// messages and tool schemas hold a handful of keys.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // namespace(): the one value `set ns.x = ...` may change

  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

// Python's str() of a value, as {{ }} prints it.
std::string to_str(const Value& v);
// Python's repr(): strings quoted, as inside printed lists.
std::string to_repr(const Value& v);
// Python's repr of a float: the shortest text that reads back the same.
std::string float_repr(double v);
// Python's ==.
bool equal(const Value& a, const Value& b);
// Python's <, for numbers, strings and lists; throws TemplateError otherwise.
bool less(const Value& a, const Value& b);

// The number of characters of valid UTF-8 text, and its characters.
std::size_t char_count(const std::string& s);
std::vector<std::string> characters(const std::string& s);

}  // namespace accel::chat_template
