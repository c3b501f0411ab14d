#include "engine/json/json_node.h"

#include "engine/json/json_error.h"
#include "engine/json/json_reader.h"

namespace accel::strict_json {

std::string JsonNode::where() const {
  return "'" + file_ + "'" + (path_.empty() ? "" : ": " + path_);
}

void JsonNode::fail(const std::string& what) const { throw JsonError("", where() + " " + what); }

bool JsonNode::has(const char* key) const {
  if (!value_->is_object()) json_wrong_type(*value_, where(), "an object");
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonNode JsonNode::at(const char* key) const {
  const nlohmann::json& value = json_member(*value_, key, where());
  if (value.is_null()) throw JsonError("", where() + " has no '" + key + "'");
  return child(value, path_.empty() ? key : path_ + "." + key);
}

JsonNode JsonNode::item(std::size_t index) const {
  if (!value_->is_array()) json_wrong_type(*value_, where(), "a list");
  return child((*value_)[index], path_ + "[" + std::to_string(index) + "]");
}

std::size_t JsonNode::size() const {
  if (!value_->is_array()) json_wrong_type(*value_, where(), "a list");
  return value_->size();
}

std::string JsonNode::string() const { return json_string(*value_, where()); }

bool JsonNode::boolean() const { return json_boolean(*value_, where()); }

uint64_t JsonNode::unsigned_integer(uint64_t max) const {
  const uint64_t v = json_unsigned(*value_, where());
  if (v > max) fail("is " + std::to_string(v) + ", more than the largest allowed, " + std::to_string(max));
  return v;
}

double JsonNode::number() const { return json_number(*value_, where()); }

std::string JsonNode::string_or(const char* key, const std::string& fallback) const {
  return has(key) ? at(key).string() : fallback;
}

bool JsonNode::boolean_or(const char* key, bool fallback) const {
  return has(key) ? at(key).boolean() : fallback;
}

uint64_t JsonNode::unsigned_or(const char* key, uint64_t fallback, uint64_t max) const {
  return has(key) ? at(key).unsigned_integer(max) : fallback;
}

}  // namespace accel::strict_json
