// How much a tokenizer's stage may make of its input. A tokenizer.json
// chooses its normalizers and decoders: 40 `Replace "a" -> "aa"` steps in a
// 3 KB file would turn 17 bytes into terabytes. Real files grow text by a
// few times at most (Llama's Prepend and Replace " " -> "▁" triple a text
// of spaces; NFKD's widest expansion is 12 times; ByteLevel doubles), so
// each step, and each chain of steps together, may make at most kMaxGrowth
// times its input plus kGrowthSlack bytes; beyond is an error naming the
// step, not a machine out of memory. A Replace checks its bound before it
// builds its output.
#pragma once
#include <cstddef>
#include <string>

#include "engine/tokenizers/tokenizer_error.h"

namespace accel::tokenizers {

constexpr std::size_t kMaxGrowth = 16;
constexpr std::size_t kGrowthSlack = 1024;

inline std::size_t growth_limit(std::size_t input) { return input * kMaxGrowth + kGrowthSlack; }

// Throws, naming `where` (the step), when `output` bytes exceed what `input` bytes allow.
inline void check_growth(const std::string& where, std::size_t input, std::size_t output) {
  if (output <= growth_limit(input)) return;
  throw TokenizerError(where + " makes " + std::to_string(output) + " bytes of " + std::to_string(input) +
                       ", more than " + std::to_string(kMaxGrowth) + " times its input plus " +
                       std::to_string(kGrowthSlack) + " (a tokenizer file that grows text without bound)");
}

}  // namespace accel::tokenizers
