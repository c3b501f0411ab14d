// Decoders: tokenizer.json's "decoder", which turns tokens back into text.
// The reference's types (decoders/*.rs): ByteLevel (bytes back from the
// byte alphabet, then lossy UTF-8), ByteFallback (<0xNN> runs back to
// text), Metaspace, WordPiece (## joins, with its cleanup), BPEDecoder
// (end-of-word suffixes), Replace, Strip, Fuse and Sequence; CTC and any
// other type are refused, naming it and where it is.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/json/json_node.h"

namespace accel::tokenizers {

using strict_json::JsonNode;

class Decoder {
 public:
  virtual ~Decoder() = default;
  // The reference's decode_chain: tokens in, tokens (or one text) out.
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;

  // Where the step sits in its file ("'tok.json': decoder.decoders[1]"), for errors.
  std::string where;
};

// The steps a tokenizer.json "decoder" value describes, Sequences flattened.
std::vector<std::unique_ptr<Decoder>> make_decoders(const JsonNode& node);

}  // namespace accel::tokenizers
