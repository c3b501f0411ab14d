// The little JSON the checkpoint files need: strings quoted for writing by
// hand, and parsing through yaml-cpp (JSON is valid YAML 1.2 flow syntax).
#pragma once
#include <yaml-cpp/yaml.h>

#include <string>

namespace accel::checkpoint {

// `text` as a JSON string literal, quotes included.
std::string json_quote(const std::string& text);

// Parses JSON; a syntax error becomes a CheckpointError naming `source`
// (a file name) with the line and column.
YAML::Node parse_json(const std::string& text, const std::string& source);

}  // namespace accel::checkpoint
