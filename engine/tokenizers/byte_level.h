// GPT-2's byte-level alphabet: each of the 256 bytes stands for one
// printable character (the printable Latin-1 bytes for themselves, the
// others for U+0100 on), so any text, split into its UTF-8 bytes, is a
// string of characters a BPE vocabulary can hold. The ByteLevel
// pre-tokenizer and normalizer map text into it; the ByteLevel decoder maps
// tokens back.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace accel::tokenizers {

// Appends the byte-level characters of `bytes`.
void append_byte_level(std::string& out, std::string_view bytes);

// The bytes a byte-level token stands for, or nothing when one of its
// characters is not in the alphabet (the decoder then keeps the token's
// own UTF-8 bytes, as the reference does). `token` is valid UTF-8.
std::optional<std::string> byte_level_bytes(std::string_view token);

}  // namespace accel::tokenizers
