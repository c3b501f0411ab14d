// The "pattern" of tokenizer.json's Replace normalizer and decoder and its
// Split pre-tokenizer: {"String": "..."}, matched as it is, or
// {"Regex": "..."} (regex.h).
#pragma once
#include "engine/json/json_node.h"
#include "engine/tokenizers/regex.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

Regex make_pattern(const JsonNode& node);

}  // namespace accel::tokenizers
