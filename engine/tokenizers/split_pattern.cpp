#include "engine/tokenizers/split_pattern.h"

namespace accel::tokenizers {

Regex make_pattern(const JsonNode& node) {
  if (node.has("String")) return Regex::literal(node.string("String"), node.at("String").where());
  if (node.has("Regex")) return Regex::compile(node.string("Regex"), node.at("Regex").where());
  node.fail("is neither {\"String\": ...} nor {\"Regex\": ...}");
}

}  // namespace accel::tokenizers
