#include "engine/tokenizers/tokenizer.h"

#include <cstdio>

#include "engine/tokenizers/tokenizer_error.h"
#include "engine/utf8/utf8.h"

namespace accel::tokenizers {

void check_utf8(std::string_view text, const std::string& what) {
  const std::size_t bad = utf8::first_invalid(text);
  if (bad == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "\\x%02X", static_cast<unsigned char>(text[bad]));
  throw TokenizerError(what + " is not valid UTF-8: byte " + std::to_string(bad) + " (0-based) is " + byte);
}

Encoding Tokenizer::encode(std::string_view text, const std::string_view* pair, bool add_special_tokens,
                           const Truncation* truncation) const {
  check_utf8(text, pair ? "the first text" : "the text");
  if (pair) check_utf8(*pair, "the second text");
  Encoding first;
  first.ids = encode_text(text);
  Encoding second;
  if (pair) second.ids = encode_text(*pair);
  first.type_ids.assign(first.ids.size(), 0);
  second.type_ids.assign(second.ids.size(), 1);
  if (truncation) {
    // Room is kept for the special tokens, as the reference keeps it.
    const std::size_t added = add_special_tokens ? special_tokens_added(pair != nullptr) : 0;
    if (truncation->max_length < added) {
      throw TokenizerError("max_length " + std::to_string(truncation->max_length) + " leaves no room: the " +
                           std::to_string(added) + " special tokens alone are longer");
    }
    Truncation room = *truncation;
    room.max_length -= added;
    truncate(first, pair ? &second : nullptr, room);
  }
  return finish(std::move(first), pair ? &second : nullptr, add_special_tokens);
}

}  // namespace accel::tokenizers
