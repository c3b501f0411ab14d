// Reading tokenizer.json (Hugging Face `tokenizers`' file, version "1.0")
// into a PipelineTokenizer. Every part is checked as it is read, and what
// accel does not support is refused with the file, the key and the type
// named: "'tok/tokenizer.json': normalizer.normalizers[0].type is
// 'Precompiled', a normalizer accel does not support (...)". The file's
// "truncation" and "padding" are not applied: as in transformers, each
// call says how to cut and pad (they are read for their pad token, below).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/tokenizers/pipeline_tokenizer.h"

namespace accel::tokenizers {

// Larger than any tokenizer.json of a released checkpoint (a few to tens of MiB).
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{512} << 20;

// The padding a file's "padding" names, for a tokenizer whose config gives no pad token.
struct FilePadding {
  std::string pad_token;
  int32_t pad_id = 0;
};

struct TokenizerFile {
  std::unique_ptr<PipelineTokenizer> tokenizer;
  std::optional<FilePadding> padding;
};

// Parses `text`, the contents of `source` (a path, named in errors).
TokenizerFile parse_tokenizer_json(const std::string& text, const std::string& source);
TokenizerFile read_tokenizer_json(const std::string& path);

}  // namespace accel::tokenizers
