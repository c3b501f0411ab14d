// A value of a JSON file together with where it sits, so that every error
// (a JsonError) names the file and the key: "'tok/tokenizer.json':
// pre_tokenizer.pretokenizers[1].pattern is a number, expected a string".
// The typed reads are json_reader.h's. Absent keys and JSON null are the
// same here, as they are to Hugging Face's Rust readers (serde's Option),
// whose files (tokenizer.json) are read through it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace accel::strict_json {

class JsonNode {
 public:
  JsonNode(const nlohmann::json& value, std::string file, std::string path)
      : value_(&value), file_(std::move(file)), path_(std::move(path)) {}

  const nlohmann::json& value() const { return *value_; }
  // "'file': path", or "'file'" for the whole document.
  std::string where() const;
  [[noreturn]] void fail(const std::string& what) const;

  bool has(const char* key) const;  // present and not null
  JsonNode at(const char* key) const;  // required
  JsonNode item(std::size_t index) const;
  std::size_t size() const;  // of an array, which this must be

  std::string string() const;
  bool boolean() const;
  uint64_t unsigned_integer(uint64_t max) const;
  double number() const;

  std::string string(const char* key) const { return at(key).string(); }
  std::string string_or(const char* key, const std::string& fallback) const;
  bool boolean_or(const char* key, bool fallback) const;
  uint64_t unsigned_or(const char* key, uint64_t fallback, uint64_t max) const;

  bool is_object() const { return value_->is_object(); }
  bool is_array() const { return value_->is_array(); }
  bool is_string() const { return value_->is_string(); }

 private:
  JsonNode child(const nlohmann::json& value, const std::string& path) const {
    return JsonNode(value, file_, path);
  }

  const nlohmann::json* value_;
  std::string file_;
  std::string path_;
};

}  // namespace accel::strict_json
