#include "engine/tokenizers/tokenizer_json.h"

#include "engine/files/outside_file.h"
#include "engine/json/json_error.h"
#include "engine/json/json_reader.h"
#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {
namespace {

AddedToken read_added_token(const JsonNode& node) {
  AddedToken t;
  t.content = node.string("content");
  t.special = node.boolean_or("special", false);
  t.single_word = node.boolean_or("single_word", false);
  t.lstrip = node.boolean_or("lstrip", false);
  t.rstrip = node.boolean_or("rstrip", false);
  t.normalized = node.boolean_or("normalized", !t.special);
  return t;
}

TokenizerFile tokenizer_from_json(const std::string& text, const std::string& source) {
  const nlohmann::json document = strict_json::parse_json(text, source, kMaxTokenizerJsonBytes);
  const JsonNode root(document, source, "");
  if (root.has("version") && root.string("version") != "1.0") {
    root.at("version").fail("is '" + root.string("version") + "', expected \"1.0\"");
  }
  Pipeline p;
  if (root.has("normalizer")) p.normalizers = make_normalizers(root.at("normalizer"));
  if (root.has("pre_tokenizer")) p.pre_tokenizers = make_pre_tokenizers(root.at("pre_tokenizer"));
  p.model = make_model(root.at("model"));
  if (root.has("post_processor")) p.post_processor = make_post_processor(root.at("post_processor"));
  if (root.has("decoder")) {
    p.decoders = make_decoders(root.at("decoder"));
    p.has_decoder = true;
  }
  if (root.has("added_tokens")) {
    const JsonNode tokens = root.at("added_tokens");
    for (std::size_t i = 0; i < tokens.size(); ++i) p.added_tokens.push_back(read_added_token(tokens.item(i)));
  }
  TokenizerFile file;
  if (root.has("padding")) {
    const JsonNode padding = root.at("padding");
    FilePadding fp;
    fp.pad_token = padding.string_or("pad_token", "[PAD]");
    fp.pad_id = static_cast<int32_t>(padding.unsigned_or("pad_id", 0, INT32_MAX));
    file.padding = fp;
  }
  file.tokenizer = std::make_unique<PipelineTokenizer>(std::move(p));
  return file;
}

}  // namespace

TokenizerFile parse_tokenizer_json(const std::string& text, const std::string& source) {
  // Every JsonNode read happens here: its errors (which name the file and
  // the key) become the tokenizers' one error type.
  try {
    return tokenizer_from_json(text, source);
  } catch (const strict_json::JsonError& e) {
    throw TokenizerError(e.what());
  }
}

TokenizerFile read_tokenizer_json(const std::string& path) {
  return parse_tokenizer_json(read_outside_file(path, kMaxTokenizerJsonBytes), path);
}

}  // namespace accel::tokenizers
