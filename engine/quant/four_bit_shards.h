// A 4-bit weight's storage sharded over the ranks of a group along dim 0,
// as FSDP shards a float parameter, for the frozen base of QLoRA under
// ZeRO-3 / FSDP: rank r keeps the codes and absmax of its whole blocks
// only (blocks [r b, (r + 1) b), b = ceil(blocks / ranks); the last rank's
// part padded with zeros, so every rank's is as large), and the weight is
// all-gathered for each product and dropped after it (linear_4bit.h). A
// block never straddles two ranks: each rank's bytes decode with its own
// absmax. The nested statistics of double quantization (one float per 256
// blocks), the code books and the shape stay whole on every rank: they are
// 1/16384 of the codes. No gradient ever reaches the codes (they are
// frozen), so nothing is reduce-scattered for them.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>

#include "engine/quant/four_bit_weight.h"

namespace accel {
class Communicator;
}

namespace accel::quant {

struct FourBitShard {
  // packed: this rank's bytes (uint8, 1-D), absmax: its blocks' statistics
  // (float32, or uint8 codes when nested); every other field the whole
  // weight's.
  FourBitWeight part;
  at::ScalarType quant_storage = at::kByte;  // the dtype the whole weight's bytes are viewed as
  int64_t ranks = 1;
};

// Rank `rank` of `ranks`' shard of `w`.
FourBitShard shard_four_bit(const FourBitWeight& w, int64_t rank, int64_t ranks);

// The whole weight from every rank's shard: one all-gather of the bytes and
// one of the absmax over `group`, whose size must be the shard's ranks.
FourBitWeight gather_four_bit(const FourBitShard& shard, Communicator& group);

// Checks a shard's sizes agree with its weight's shape, naming `where`.
void check_four_bit_shard(const FourBitShard& shard, const std::string& where);

}  // namespace accel::quant
