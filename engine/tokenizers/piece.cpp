#include "engine/tokenizers/piece.h"

#include "engine/tokenizers/byte_level.h"

namespace accel::tokenizers {

void map_pending_bytes(Piece& piece) {
  if (!piece.bytes_unmapped) return;
  std::string mapped;
  mapped.reserve(piece.text.size() * 2);
  append_byte_level(mapped, piece.text);
  piece.text.swap(mapped);
  piece.bytes_unmapped = false;
}

}  // namespace accel::tokenizers
