#include "engine/formats/pickle_reader.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/formats/format_error.h"

namespace accel::formats {
namespace {

struct Value;
using ValuePtr = std::shared_ptr<Value>;

// A state dict nests a few levels deep; this bound turns a hostile pickle of
// containers nested 200,000 deep into an error instead of a deep value tree.
constexpr int kMaxDepth = 1000;

// The values (and memo entries) a pickle may make: one per two of its bytes,
// the densest a state dict is written (a list of small ints, BININT1 each),
// plus a few for the smallest files. A value costs about 150 bytes here, so
// a hostile pickle of one-byte opcodes (EMPTY_LIST, NONE...) costs at most
// about 75 bytes of memory per byte of it, not 143 and more.
constexpr std::size_t kBytesPerValue = 2;
constexpr std::size_t kFreeValues = 1 << 16;

struct Value {
  enum class Kind { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };
  Kind kind = Kind::None;
  int64_t integer = 0;  // Bool and Int
  double real = 0;
  std::string text;            // String; Global: "module.name"
  std::vector<ValuePtr> items;  // Tuple, List; Dict: key, value, key, value...
  at::Tensor tensor;           // Storage: 1-D typed; Tensor
  int depth = 0;               // containers: 1 + the deepest item when it was added

  Value() = default;
  Value(const Value&) = delete;
  Value& operator=(const Value&) = delete;
  // Frees the items iteratively: the default destructor recurses once per
  // nesting level, and a deep enough tree (built through the memo, which the
  // depth bound cannot follow) would overflow the stack.
  ~Value() {
    std::vector<ValuePtr> pending = std::move(items);
    while (!pending.empty()) {
      ValuePtr v = std::move(pending.back());
      pending.pop_back();
      if (v.use_count() == 1) {
        for (ValuePtr& item : v->items) pending.push_back(std::move(item));
        v->items.clear();
      }
    }
  }
};

ValuePtr new_value(Value::Kind kind) {
  auto v = std::make_shared<Value>();
  v->kind = kind;
  return v;
}

const char* kind_name(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::Tuple: return "tuple";
    case Value::Kind::List: return "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Global: return "global";
    case Value::Kind::Storage: return "storage";
    case Value::Kind::Tensor: return "tensor";
  }
  return "value";
}

at::ScalarType storage_dtype(const std::string& name, const std::string& source) {
  static const std::map<std::string, at::ScalarType> types = {
      {"torch.FloatStorage", at::kFloat},   {"torch.DoubleStorage", at::kDouble},
      {"torch.HalfStorage", at::kHalf},     {"torch.BFloat16Storage", at::kBFloat16},
      {"torch.LongStorage", at::kLong},     {"torch.IntStorage", at::kInt},
      {"torch.ShortStorage", at::kShort},   {"torch.CharStorage", at::kChar},
      {"torch.ByteStorage", at::kByte},     {"torch.BoolStorage", at::kBool},
  };
  auto it = types.find(name);
  if (it == types.end()) {
    throw FormatError("'" + source + "' holds a storage of type " + name + ", which the engine cannot read");
  }
  return it->second;
}

class Machine {
 public:
  Machine(const std::string& data, const LoadRecord& load_record, const std::string& source)
      : data_(data), load_record_(load_record), source_(source),
        value_budget_(data.size() / kBytesPerValue + kFreeValues) {}
  Machine(const Machine&) = delete;
  Machine& operator=(const Machine&) = delete;
  // A container can hold itself (a list appended into itself through the
  // memo or DUP), a cycle of shared pointers that would never be freed.
  // Only adopt() adds items to a container that already exists, so every
  // cycle passes through one it filled: emptying those frees all.
  ~Machine() {
    for (const ValuePtr& value : filled_) {
      std::vector<ValuePtr> items;
      items.swap(value->items);
    }
  }

  ValuePtr run() {
    while (true) {
      unsigned char op = byte();
      switch (op) {
        case 0x80: byte(); break;                // PROTO
        case 0x95: bytes(8); break;              // FRAME
        case '.': return pop();                  // STOP
        case '(': marks_.push_back(stack_.size()); break;
        case '}': push(make(Value::Kind::Dict)); break;
        case ']': push(make(Value::Kind::List)); break;
        case ')': push(make(Value::Kind::Tuple)); break;
        case 't': push(sequence(Value::Kind::Tuple, pop_mark())); break;
        case 'l': push(sequence(Value::Kind::List, pop_mark())); break;
        case 'd': push(sequence(Value::Kind::Dict, pop_mark())); break;
        case 0x85: push(sequence(Value::Kind::Tuple, pop_n(1))); break;  // TUPLE1
        case 0x86: push(sequence(Value::Kind::Tuple, pop_n(2))); break;  // TUPLE2
        case 0x87: push(sequence(Value::Kind::Tuple, pop_n(3))); break;  // TUPLE3
        // The items come off the stack before the container is looked up
        // under them: in one call the order of the arguments is the compiler's.
        case 'a': {                                                         // APPEND
          auto items = pop_n(1);
          adopt(container(Value::Kind::List), std::move(items));
          break;
        }
        case 'e': {                                                         // APPENDS
          auto items = pop_mark();
          adopt(container(Value::Kind::List), std::move(items));
          break;
        }
        case 's': {                                                         // SETITEM
          auto items = pop_n(2);
          adopt(container(Value::Kind::Dict), std::move(items));
          break;
        }
        case 'u': {                                                         // SETITEMS
          auto items = pop_mark();
          adopt(container(Value::Kind::Dict), std::move(items));
          break;
        }
        case 'q': remember(byte()); break;                          // BINPUT
        case 'r': remember(little_endian(4)); break;                // LONG_BINPUT
        case 0x94: remember(memo_.size()); break;                   // MEMOIZE
        case 'h': push(memo(byte())); break;                        // BINGET
        case 'j': push(memo(little_endian(4))); break;              // LONG_BINGET
        case 'J': push(integer(static_cast<int32_t>(little_endian(4)))); break;  // BININT
        case 'K': push(integer(byte())); break;                     // BININT1
        case 'M': push(integer(little_endian(2))); break;           // BININT2
        case 0x8a: push(integer(long1(byte()))); break;             // LONG1
        case 'G': {                                                 // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
          auto v = make(Value::Kind::Float);
          std::memcpy(&v->real, &bits, 8);
          push(v);
          break;
        }
        case 'N': push(make(Value::Kind::None)); break;
        case 0x88: push(boolean(true)); break;   // NEWTRUE
        case 0x89: push(boolean(false)); break;  // NEWFALSE
        case 'X': push(string(bytes(little_endian(4)))); break;    // BINUNICODE
        case 0x8c: push(string(bytes(byte()))); break;             // SHORT_BINUNICODE
        case 0x8d: push(string(bytes(little_endian(8)))); break;   // BINUNICODE8
        case 'T': push(string(bytes(little_endian(4)))); break;    // BINSTRING
        case 'U': push(string(bytes(byte()))); break;              // SHORT_BINSTRING
        case 'c': {                                                 // GLOBAL
          std::string module = line();
          push(global(module + "." + line()));
          break;
        }
        case 0x93: {                                                // STACK_GLOBAL
          ValuePtr name = pop();
          ValuePtr module = pop();
          push(global(module->text + "." + name->text));
          break;
        }
        case 'R':                                                   // REDUCE
        case 0x81: {                                                // NEWOBJ
          ValuePtr args = pop();
          ValuePtr callable = pop();
          push(call(callable, args));
          break;
        }
        case 'b': pop(); break;  // BUILD: object state (OrderedDict._metadata) is not kept
        case 'Q': push(persistent(pop())); break;                   // BINPERSID
        case '0': pop(); break;                                     // POP
        case '1': pop_mark(); break;                                // POP_MARK
        case '2': push(top()); break;                               // DUP
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          fail(std::string("pickle opcode ") + hex + " at byte " + std::to_string(pos_ - 1) +
               " is not one a state dict uses");
        }
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError("'" + source_ + "': " + what);
  }

  // Counts one more value or memo entry against the budget.
  void spend() {
    if (++made_ > value_budget_) {
      fail("the pickle makes more than " + std::to_string(value_budget_) + " values from " +
           std::to_string(data_.size()) + " bytes (a state dict takes at least " + std::to_string(kBytesPerValue) +
           " bytes a value): it is not a state dict");
    }
  }

  ValuePtr make(Value::Kind kind) {
    spend();
    return new_value(kind);
  }

  void remember(uint64_t key) {
    if (!memo_.count(key)) spend();
    memo_[key] = top();
  }

  unsigned char byte() {
    if (pos_ >= data_.size()) fail("the pickle ends before its STOP opcode (the file is truncated)");
    return static_cast<unsigned char>(data_[pos_++]);
  }

  std::string bytes(uint64_t n) {
    if (n > data_.size() - pos_) fail("the pickle ends inside a value (the file is truncated)");
    std::string out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

  uint64_t little_endian(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{byte()} << (8 * i);
    return v;
  }

  int64_t long1(int n) {
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes is too large");
    uint64_t v = little_endian(n);
    if (n > 0 && n < 8 && (v >> (8 * n - 1)) & 1) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<int64_t>(v);
  }

  std::string line() {
    std::size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("a GLOBAL opcode has no end of line");
    std::string out = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return out;
  }

  void push(ValuePtr v) { stack_.push_back(std::move(v)); }

  ValuePtr top() {
    if (stack_.empty()) fail("the pickle reads from an empty stack");
    return stack_.back();
  }

  ValuePtr pop() {
    ValuePtr v = top();
    stack_.pop_back();
    return v;
  }

  std::vector<ValuePtr> pop_n(std::size_t n) {
    if (stack_.size() < n) fail("the pickle reads from an empty stack");
    std::vector<ValuePtr> out(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return out;
  }

  std::vector<ValuePtr> pop_mark() {
    if (marks_.empty()) fail("the pickle closes a MARK it never opened");
    std::size_t mark = marks_.back();
    marks_.pop_back();
    return pop_n(stack_.size() - mark);
  }

  ValuePtr container(Value::Kind kind) {
    ValuePtr c = top();
    if (c->kind != kind) fail(std::string("the pickle adds items to a ") + kind_name(c->kind));
    return c;
  }

  ValuePtr memo(uint64_t key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) fail("the pickle refers to memo entry " + std::to_string(key) + ", never stored");
    return it->second;
  }

  ValuePtr sequence(Value::Kind kind, std::vector<ValuePtr> items) {
    auto v = make(kind);
    adopt(v, std::move(items));
    return v;
  }

  // Adds items to a container, keeping its depth within kMaxDepth.
  void adopt(const ValuePtr& container, std::vector<ValuePtr> items) {
    if (filled_.empty() || filled_.back() != container) filled_.push_back(container);
    for (ValuePtr& item : items) {
      container->depth = std::max(container->depth, item->depth + 1);
      if (container->depth > kMaxDepth) {
        fail("the pickle nests containers more than " + std::to_string(kMaxDepth) +
             " deep, which no state dict does");
      }
      container->items.push_back(std::move(item));
    }
  }
  ValuePtr integer(int64_t i) {
    auto v = make(Value::Kind::Int);
    v->integer = i;
    return v;
  }
  ValuePtr boolean(bool b) {
    auto v = make(Value::Kind::Bool);
    v->integer = b;
    return v;
  }
  ValuePtr string(std::string s) {
    auto v = make(Value::Kind::String);
    v->text = std::move(s);
    return v;
  }
  ValuePtr global(std::string name) {
    auto v = make(Value::Kind::Global);
    v->text = std::move(name);
    return v;
  }

  std::vector<int64_t> ints(const ValuePtr& v, const char* what) {
    if (v->kind != Value::Kind::Tuple && v->kind != Value::Kind::List) fail(std::string(what) + " is not a tuple");
    std::vector<int64_t> out;
    for (const ValuePtr& item : v->items) {
      if (item->kind != Value::Kind::Int) fail(std::string(what) + " holds a non-integer");
      out.push_back(item->integer);
    }
    return out;
  }

  // ('storage', storage type, key, location, numel) -> the storage's bytes as a typed 1-D tensor.
  ValuePtr persistent(const ValuePtr& pid) {
    if (pid->kind != Value::Kind::Tuple || pid->items.size() < 5 || pid->items[0]->text != "storage" ||
        pid->items[1]->kind != Value::Kind::Global || pid->items[2]->kind != Value::Kind::String) {
      fail("a persistent id is not a ('storage', type, key, location, size) tuple");
    }
    at::ScalarType dtype = storage_dtype(pid->items[1]->text, source_);
    const std::string& key = pid->items[2]->text;
    const ValuePtr& numel = pid->items[4];
    uint64_t bytes = 0;
    if (numel->kind != Value::Kind::Int || numel->integer < 0 ||
        __builtin_mul_overflow(static_cast<uint64_t>(numel->integer), at::elementSize(dtype), &bytes)) {
      fail("storage '" + key + "' declares no valid element count");
    }
    auto cached = storages_.find(key);
    if (cached == storages_.end()) {
      at::Tensor raw = load_record_(key, bytes);
      if (static_cast<uint64_t>(raw.numel()) != bytes) {
        fail("storage '" + key + "' has " + std::to_string(raw.numel()) + " bytes, but the pickle declares " +
             std::to_string(bytes));
      }
      cached = storages_.emplace(key, raw.view(dtype)).first;
    } else if (static_cast<uint64_t>(cached->second.numel()) * at::elementSize(dtype) != bytes) {
      fail("storage '" + key + "' is declared twice with different sizes");
    }
    auto v = make(Value::Kind::Storage);
    v->tensor = cached->second;
    return v;
  }

  ValuePtr rebuild_tensor(const std::vector<ValuePtr>& args) {
    if (args.size() < 4 || args[0]->kind != Value::Kind::Storage || args[1]->kind != Value::Kind::Int) {
      fail("_rebuild_tensor_v2 has unexpected arguments");
    }
    const at::Tensor& storage = args[0]->tensor;
    int64_t offset = args[1]->integer;
    std::vector<int64_t> size = ints(args[2], "a tensor's size");
    std::vector<int64_t> stride = ints(args[3], "a tensor's stride");
    if (size.size() != stride.size()) fail("a tensor's size and stride differ in length");
    // The last element's position, in checked arithmetic: a hostile offset or
    // stride near 2^63 must not wrap around to a position inside the storage.
    const std::string past_end =
        "a tensor reaches past the end of its storage (" + std::to_string(storage.numel()) + " elements)";
    if (offset < 0 || offset > storage.numel()) fail(past_end);
    int64_t last = offset;
    bool empty = false;
    for (std::size_t d = 0; d < size.size(); ++d) {
      if (size[d] < 0 || stride[d] < 0) fail("a tensor has a negative size or stride");
      if (size[d] == 0) empty = true;
    }
    for (std::size_t d = 0; d < size.size() && !empty; ++d) {
      int64_t reach = 0;
      if (__builtin_mul_overflow(size[d] - 1, stride[d], &reach) || __builtin_add_overflow(last, reach, &last)) {
        fail(past_end);
      }
    }
    if (!empty && last >= storage.numel()) fail(past_end);
    auto v = make(Value::Kind::Tensor);
    v->tensor = empty ? at::empty(size, storage.options()) : storage.as_strided(size, stride, offset);
    return v;
  }

  ValuePtr call(const ValuePtr& callable, const ValuePtr& args) {
    if (callable->kind != Value::Kind::Global) fail(std::string("the pickle calls a ") + kind_name(callable->kind));
    const std::string& name = callable->text;
    const std::vector<ValuePtr>& a = args->items;
    if (name == "collections.OrderedDict" || name == "builtins.dict" || name == "__builtin__.dict") {
      auto dict = make(Value::Kind::Dict);
      if (!a.empty() && a[0]->kind == Value::Kind::List) {
        for (const ValuePtr& pair : a[0]->items) {
          if (pair->items.size() != 2) fail(name + " is given something other than pairs");
          adopt(dict, pair->items);
        }
      }
      return dict;
    }
    if (name == "torch._utils._rebuild_tensor_v2" || name == "torch._utils._rebuild_tensor") {
      return rebuild_tensor(a);
    }
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state" ||
        name == "torch.jit._pickle.restore_type_tag") {
      if (a.empty()) fail(name + " is called without arguments");
      return a[0];
    }
    fail("the pickle calls " + name + ", which a file of tensors does not need (only dicts of tensors are read)");
  }

  const std::string& data_;
  const LoadRecord& load_record_;
  const std::string& source_;
  std::size_t pos_ = 0;
  std::vector<ValuePtr> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint64_t, ValuePtr> memo_;
  std::vector<ValuePtr> filled_;  // containers adopt() added to, for ~Machine
  std::unordered_map<std::string, at::Tensor> storages_;
  const std::size_t value_budget_;
  std::size_t made_ = 0;  // values and memo entries so far
};

}  // namespace

NamedTensors unpickle_state_dict(const std::string& pickle, const LoadRecord& load_record, const std::string& source) {
  // The machine lives until the tensors are taken out: its end empties the
  // memo'd containers, the root among them.
  Machine machine(pickle, load_record, source);
  ValuePtr root = machine.run();
  if (root->kind != Value::Kind::Dict) {
    throw FormatError("'" + source + "' holds a " + kind_name(root->kind) + ", not a dict of tensors");
  }
  NamedTensors out;
  for (std::size_t i = 0; i + 1 < root->items.size(); i += 2) {
    const ValuePtr& key = root->items[i];
    const ValuePtr& value = root->items[i + 1];
    if (key->kind != Value::Kind::String || value->kind != Value::Kind::Tensor) {
      throw FormatError("'" + source + "' is a dict, but not of names to tensors (an entry maps a " +
                            kind_name(key->kind) + " to a " + kind_name(value->kind) + ")");
    }
    out.emplace_back(key->text, value->tensor);
  }
  return out;
}

}  // namespace accel::formats
