// The one error type of the tokenizers. Its message names the file and the
// key (tokenizer.json's "pre_tokenizer.pretokenizers[1].pattern"), the id
// or the byte of the text at fault.
#pragma once
#include <stdexcept>
#include <string>

namespace accel::tokenizers {

struct TokenizerError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace accel::tokenizers
