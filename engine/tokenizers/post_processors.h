// Post-processors: tokenizer.json's "post_processor", which adds the
// special tokens a model expects around one text or a pair (BOS, EOS,
// [CLS] and [SEP]) and sets each id's segment. The reference's types
// (processors/*.rs): TemplateProcessing (Llama's BOS, BERT's template),
// BertProcessing, RobertaProcessing, ByteLevel (offsets only, so nothing
// for ids) and Sequence; any other is refused, naming it and where it is.
#pragma once
#include <memory>
#include <vector>

#include "engine/tokenizers/encoding.h"
#include "engine/json/json_node.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // How many ids it adds to one text or a pair, for truncation.
  virtual std::size_t added_tokens(bool pair) const = 0;
  // The reference's process_encodings: one or two encodings in, their
  // segments already 0 and 1; what comes out is concatenated.
  virtual void process(std::vector<Encoding>& encodings, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const JsonNode& node);

// The reference's PostProcessor::process: segments 0 and 1, then
// `processor` (nullptr: none), then everything concatenated.
Encoding post_process(const PostProcessor* processor, Encoding first, Encoding* pair, bool add_special_tokens);

}  // namespace accel::tokenizers
