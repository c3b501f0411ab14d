// Tokenizers a warm worker keeps between runs (accel-run serve, --watch,
// repl), as it keeps loaded weights (engine/formats/kept_weights.h): a
// tokenizer.json a run read is handed, parsed, to the next run that reads
// the same file, keyed by the file's path, device, inode, size and
// modification time (a file saved again is another file). A tokenizer is
// immutable once read (its memo of words already split only saves work),
// so runs can share it. end_run() forgets what the run that ended did not
// read.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "engine/tokenizers/tokenizer_json.h"

namespace accel::tokenizers {

struct KeptTokenizer {
  std::shared_ptr<const PipelineTokenizer> tokenizer;
  std::optional<FilePadding> padding;
};

class KeptTokenizers {
 public:
  // The tokenizer of `path` as a run read it before, or what reading it
  // now gives (kept for the next run). Throws as read_tokenizer_json does.
  KeptTokenizer read(const std::string& path);
  void end_run();
  int64_t found() const { return found_; }

 private:
  struct Entry {
    KeptTokenizer kept;
    bool used = true;
  };
  std::map<std::string, Entry> entries_;
  int64_t found_ = 0;
};

}  // namespace accel::tokenizers
