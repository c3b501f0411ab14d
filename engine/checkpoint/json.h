// The JSON of files the engine reads but may not have written: checkpoint
// manifests, safetensors headers, sharded-weights indexes. nlohmann::json
// parses strict RFC 8259 JSON (no comments, no trailing commas, no YAML,
// valid UTF-8 only); on top of it, a file is refused before parsing when it
// is larger than its kind allows, and while parsing when it nests deeper
// than kMaxJsonDepth or repeats a key in one object. Every error names the
// file and, for the typed accessors below, the field.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace accel::checkpoint {

// Deeper than any file the engine reads needs (a safetensors header nests 3).
constexpr int kMaxJsonDepth = 16;

// `text`, refused when it is not valid UTF-8 (no reader could load it),
// naming `what` it is; the writers pass every string through it before it
// goes into a JSON value, whose dump would refuse it without that name.
const std::string& json_utf8(const std::string& text, const std::string& what);

// What a value is, for errors: "a string", "a negative integer", "null"...
const char* json_type_name(const nlohmann::json& value);

// Parses `text` (from `source`, a file name) as one JSON object.
nlohmann::json parse_json(const std::string& text, const std::string& source, uint64_t max_bytes);

// Typed reads of one field; `where` names the file and the field for errors
// ("'model.safetensors': tensor 'w': data_offsets[1]").
const nlohmann::json& json_member(const nlohmann::json& object, const char* key, const std::string& where);
std::string json_string(const nlohmann::json& value, const std::string& where);
uint64_t json_unsigned(const nlohmann::json& value, const std::string& where);
int64_t json_integer(const nlohmann::json& value, const std::string& where);

}  // namespace accel::checkpoint
