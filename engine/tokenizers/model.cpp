#include "engine/tokenizers/model.h"

#include "engine/tokenizers/bpe_model.h"
#include "engine/tokenizers/wordpiece_model.h"

namespace accel::tokenizers {

std::unique_ptr<Model> make_model(const JsonNode& node) {
  // Files written before models carried a "type" are told apart by their keys.
  std::string type;
  if (node.has("type")) {
    type = node.string("type");
  } else if (node.has("merges")) {
    type = "BPE";
  } else if (node.has("max_input_chars_per_word")) {
    type = "WordPiece";
  } else {
    node.fail("has no 'type'");
  }
  if (type == "BPE") return std::make_unique<BpeModel>(node);
  if (type == "WordPiece") return std::make_unique<WordPieceModel>(node);
  node.at("type").fail("is '" + type + "', a model accel does not support (it reads BPE and WordPiece)");
}

}  // namespace accel::tokenizers
