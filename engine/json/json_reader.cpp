#include "engine/json/json_reader.h"

#include <vector>

#include "engine/json/json_error.h"
#include "engine/utf8/utf8.h"

namespace accel::strict_json {
namespace {

using nlohmann::json;

// Builds the document from nlohmann's parser events, as its own DOM
// builder does, plus the bounds: nesting at most kMaxJsonDepth, and no key
// twice in one object (nlohmann keeps the last silently; a file that says
// two things about one tensor is refused instead). Its callback-taking
// parse() could check both but costs time quadratic in an object's size.
class DomBuilder : public nlohmann::json_sax<json> {
 public:
  DomBuilder(json& root, const std::string& source) : root_(root), source_(source) {}

  bool null() override { return put(nullptr) != nullptr; }
  bool boolean(bool value) override { return put(value) != nullptr; }
  bool number_integer(number_integer_t value) override { return put(value) != nullptr; }
  bool number_unsigned(number_unsigned_t value) override { return put(value) != nullptr; }
  bool number_float(number_float_t value, const string_t&) override { return put(value) != nullptr; }
  bool string(string_t& value) override { return put(std::move(value)) != nullptr; }
  bool binary(binary_t&) override { return false; }  // JSON text has none

  bool start_object(std::size_t) override {
    open(put(json::object()));
    return true;
  }
  bool key(string_t& key) override {
    if (open_.back()->contains(key)) {
      throw JsonError(source_, "has the key " + utf8::quoted_for_message(key) + " twice in one object");
    }
    key_ = std::move(key);
    return true;
  }
  bool end_object() override {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    open(put(json::array()));
    return true;
  }
  bool end_array() override {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const json::exception& error) override {
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ...
    // last read: '<token>'": the token is the file's, so at most its start.
    std::string why = error.what();
    std::size_t cut = why.find("] ");
    if (cut != std::string::npos) why.erase(0, cut + 2);
    if (why.size() > 300) why = why.substr(0, 300) + "...";
    throw JsonError(source_, "is not valid JSON: " + utf8::escape_invalid(why));
  }

 private:
  // Places `value` in the innermost open container (or as the root) and
  // returns where it now lives. Pointers into an array stay valid while the
  // value is open: nothing is appended to that array until it closes.
  json* put(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& into = *open_.back();
    if (into.is_array()) {
      auto& array = into.get_ref<json::array_t&>();
      array.push_back(std::move(value));
      return &array.back();
    }
    return &into.get_ref<json::object_t&>().emplace(std::move(key_), std::move(value)).first->second;
  }
  void open(json* container) {
    if (open_.size() >= static_cast<std::size_t>(kMaxJsonDepth)) {
      throw JsonError(source_, "nests objects and lists more than " + std::to_string(kMaxJsonDepth) + " deep");
    }
    open_.push_back(container);
  }

  json& root_;
  const std::string& source_;
  std::vector<json*> open_;
  std::string key_;
};

}  // namespace

const std::string& json_utf8(const std::string& text, const std::string& what) {
  if (!utf8::valid(text)) throw JsonError("", what + " is not valid UTF-8, which JSON files cannot hold");
  return text;
}

void json_wrong_type(const json& value, const std::string& where, const char* wanted) {
  throw JsonError("", where + " is " + json_type_name(value) + ", expected " + wanted);
}

const char* json_type_name(const json& value) {
  if (value.is_number_unsigned()) return "a non-negative integer";
  if (value.is_number_integer()) return "a negative integer";
  if (value.is_number_float()) return "a number with a fraction";
  if (value.is_string()) return "a string";
  if (value.is_object()) return "an object";
  if (value.is_array()) return "a list";
  if (value.is_boolean()) return "a boolean";
  return "null";
}

json parse_json(const std::string& text, const std::string& source, uint64_t max_bytes) {
  if (text.size() > max_bytes) {
    throw JsonError(source, "has " + std::to_string(text.size()) + " bytes of JSON, more than the " +
                                std::to_string(max_bytes) + " such a file may have");
  }
  json root;
  DomBuilder builder(root, source);
  json::sax_parse(text, &builder);
  if (!root.is_object()) throw JsonError(source, "is not a JSON object");
  return root;
}

const json& json_member(const json& object, const char* key, const std::string& where) {
  if (!object.is_object()) json_wrong_type(object, where, "an object");
  auto it = object.find(key);
  if (it == object.end()) throw JsonError("", where + " has no '" + key + "'");
  return *it;
}

std::string json_string(const json& value, const std::string& where) {
  if (!value.is_string()) json_wrong_type(value, where, "a string");
  return value.get<std::string>();
}

uint64_t json_unsigned(const json& value, const std::string& where) {
  if (!value.is_number_unsigned()) json_wrong_type(value, where, "a non-negative integer");
  return value.get<uint64_t>();
}

int64_t json_integer(const json& value, const std::string& where) {
  if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > INT64_MAX)) {
    json_wrong_type(value, where, "an integer below 2^63");
  }
  return value.get<int64_t>();
}

bool json_boolean(const json& value, const std::string& where) {
  if (!value.is_boolean()) json_wrong_type(value, where, "a boolean");
  return value.get<bool>();
}

double json_number(const json& value, const std::string& where) {
  if (!value.is_number()) json_wrong_type(value, where, "a number");
  return value.get<double>();
}

}  // namespace accel::strict_json
