// The one reader of files that come from elsewhere: a downloaded model's
// tokenizer.json, tokenizer.model, tokenizer_config.json,
// special_tokens_map.json, config.json, generation_config.json, an
// adapter's adapter_config.json and adapter_model.safetensors, a
// fine-tuning data file. Whoever made the folder chose what each name is:
// a FIFO (which blocks its reader forever), /dev/zero (which reads without
// end), a folder, a file of gigabytes. So a file is opened without
// blocking, must be a regular file, and may have at most a stated number of
// bytes, checked before a byte is read; every refusal names the file.
// Its own layer (engine/files/, accel_files), below every other: the
// tokenizers, the engine and the bindings share it. No LibTorch.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace accel {

struct OutsideFileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a path names, found without opening it (lstat's target, through
// links): for "is there a tokenizer.json?" checks that must not block.
enum class OutsideFileKind { Missing, Regular, Other };
OutsideFileKind outside_file_kind(const std::string& path);

// "a FIFO", "a directory", ...: what a non-regular file is, for errors.
std::string file_kind(mode_t mode);

// A descriptor of `path` open for reading, and its size: refused at once,
// naming the file and what it is ("not a regular file (a FIFO)"), unless it
// is a regular file. The caller closes it.
int open_outside_file(const std::string& path, uint64_t* size);

// The whole of `path`, a regular file of at most `max_bytes`; refused, naming
// the file and what it is ("a FIFO", "a device"), otherwise.
std::string read_outside_file(const std::string& path, uint64_t max_bytes);

}  // namespace accel
