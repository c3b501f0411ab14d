// Checks a tokenizer.model's character maps before libsentencepiece reads
// them. A SentencePiece model (a ModelProto) carries its normalization as
// `normalizer_spec.precompiled_charsmap` (and `denormalizer_spec`'s): a
// 32-bit little-endian size, a darts-clone double-array trie of that many
// bytes (32-bit units), then NUL-terminated replacement strings the trie's
// values point into. libsentencepiece follows the trie's offsets and values
// without bounds checks, so a garbage map reads far outside the model and
// kills the process. Here every node the trie can reach is walked as
// darts-clone's commonPrefixSearch walks it (each unit's offset, each of
// the 256 labels' slots, each leaf's value), and the map is refused unless
// every read stays inside the trie and every value starts a NUL-terminated
// string inside the strings.
#pragma once
#include <string>

namespace accel::tokenizers {

// Throws TokenizerError naming `source` and the field when a character map
// of the serialized model `data` would read outside itself. The protobuf
// wire format is read only as far as it leads to the maps; what else is
// wrong with the model is libsentencepiece's to report.
void check_sentencepiece_charsmaps(const std::string& data, const std::string& source);

}  // namespace accel::tokenizers
