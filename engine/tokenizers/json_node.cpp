#include "engine/tokenizers/json_node.h"

#include "engine/checkpoint/json.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {

std::string JsonNode::where() const {
  return "'" + file_ + "'" + (path_.empty() ? "" : ": " + path_);
}

void JsonNode::fail(const std::string& what) const { throw TokenizerError(where() + " " + what); }

void JsonNode::wrong_type(const char* wanted) const {
  fail(std::string("is ") + checkpoint::json_type_name(*value_) + ", expected " + wanted);
}

bool JsonNode::has(const char* key) const {
  if (!value_->is_object()) wrong_type("an object");
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonNode JsonNode::at(const char* key) const {
  if (!value_->is_object()) wrong_type("an object");
  const auto it = value_->find(key);
  const std::string path = path_.empty() ? key : path_ + "." + key;
  if (it == value_->end() || it->is_null()) throw TokenizerError(where() + " has no '" + key + "'");
  return child(*it, path);
}

JsonNode JsonNode::item(std::size_t index) const {
  if (!value_->is_array()) wrong_type("a list");
  return child((*value_)[index], path_ + "[" + std::to_string(index) + "]");
}

std::size_t JsonNode::size() const {
  if (!value_->is_array()) wrong_type("a list");
  return value_->size();
}

std::string JsonNode::string() const {
  if (!value_->is_string()) wrong_type("a string");
  return value_->get<std::string>();
}

bool JsonNode::boolean() const {
  if (!value_->is_boolean()) wrong_type("a boolean");
  return value_->get<bool>();
}

uint64_t JsonNode::unsigned_integer(uint64_t max) const {
  if (!value_->is_number_unsigned()) wrong_type("a non-negative integer");
  const uint64_t v = value_->get<uint64_t>();
  if (v > max) fail("is " + std::to_string(v) + ", more than the largest allowed, " + std::to_string(max));
  return v;
}

double JsonNode::number() const {
  if (!value_->is_number()) wrong_type("a number");
  return value_->get<double>();
}

std::string JsonNode::string_or(const char* key, const std::string& fallback) const {
  return has(key) ? at(key).string() : fallback;
}

bool JsonNode::boolean_or(const char* key, bool fallback) const {
  return has(key) ? at(key).boolean() : fallback;
}

uint64_t JsonNode::unsigned_or(const char* key, uint64_t fallback, uint64_t max) const {
  return has(key) ? at(key).unsigned_integer(max) : fallback;
}

}  // namespace accel::tokenizers
