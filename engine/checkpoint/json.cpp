#include "engine/checkpoint/json.h"

#include <cstdio>

#include "engine/checkpoint/checkpoint_error.h"

namespace accel::checkpoint {

std::string json_quote(const std::string& text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", c);
          out += escape;
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through as is
        }
    }
  }
  out += '"';
  return out;
}

YAML::Node parse_json(const std::string& text, const std::string& source) {
  try {
    YAML::Node node = YAML::Load(text);
    if (!node.IsMap()) throw CheckpointError("'" + source + "' is not a JSON object");
    return node;
  } catch (const YAML::Exception& e) {
    throw CheckpointError("'" + source + "' is not valid JSON: line " + std::to_string(e.mark.line + 1) +
                          ", column " + std::to_string(e.mark.column + 1) + ": " + e.msg);
  }
}

}  // namespace accel::checkpoint
