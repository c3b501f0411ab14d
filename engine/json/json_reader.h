// The engine's one JSON reader, for files it reads but may not have
// written: checkpoint manifests, safetensors headers, sharded-weights
// indexes, tokenizer.json, JSONL records, the Hugging Face configs Lua
// reads (accel.core.json), the metrics accel-run plot draws. nlohmann::json
// parses strict RFC 8259 JSON (no comments, no trailing commas, no YAML,
// valid UTF-8 only); on top of it, a text is refused before parsing when it
// is larger than its kind allows, and while parsing when it nests deeper
// than kMaxJsonDepth or repeats a key in one object. Every error is a
// JsonError naming the source and, for the typed reads below, the field.
// No LibTorch: the launcher and the tokenizers link it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace accel::strict_json {

// Deeper than any file the engine reads needs (a safetensors header nests 3).
constexpr int kMaxJsonDepth = 16;

// Parses `text` (from `source`, a file name) as one JSON object.
nlohmann::json parse_json(const std::string& text, const std::string& source, uint64_t max_bytes);

// What a value is, for errors: "a string", "a negative integer", "null"...
const char* json_type_name(const nlohmann::json& value);

// Typed reads of one field; `where` names the file and the field for errors
// ("'model.safetensors': tensor 'w': data_offsets[1]").
const nlohmann::json& json_member(const nlohmann::json& object, const char* key, const std::string& where);
std::string json_string(const nlohmann::json& value, const std::string& where);
uint64_t json_unsigned(const nlohmann::json& value, const std::string& where);
int64_t json_integer(const nlohmann::json& value, const std::string& where);
bool json_boolean(const nlohmann::json& value, const std::string& where);
double json_number(const nlohmann::json& value, const std::string& where);
// The error "<where> is <its type>, expected <wanted>".
[[noreturn]] void json_wrong_type(const nlohmann::json& value, const std::string& where, const char* wanted);

// `text`, refused when it is not valid UTF-8 (no reader could load it),
// naming `what` it is; writers pass every string through it before it
// goes into a JSON value, whose dump would refuse it without that name.
const std::string& json_utf8(const std::string& text, const std::string& what);

}  // namespace accel::strict_json
