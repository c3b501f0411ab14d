#include "engine/quant/four_bit_shards.h"

#include <ATen/ATen.h>
#include <c10/util/accumulate.h>

#include <algorithm>

#include "engine/comm/communicator.h"

namespace accel::quant {
namespace {

using at::Tensor;

// The whole weight's sizes, and each rank's share of its blocks.
struct Layout {
  int64_t bytes = 0;             // the codes, two a byte
  int64_t blocks = 0;            // of blocksize values, each with its absmax
  int64_t blocks_per_rank = 0;
  int64_t bytes_per_block = 0;
};

Layout layout_of(const FourBitWeight& w, int64_t ranks) {
  TORCH_CHECK(w.blocksize % 2 == 0, "4-bit sharding: a block of ", w.blocksize, " codes is no whole number of bytes");
  TORCH_CHECK(ranks >= 1, "4-bit sharding: ", ranks, " ranks");
  const int64_t n = c10::multiply_integers(w.shape);
  Layout l;
  l.bytes = (n + 1) / 2;
  l.blocks = (n + w.blocksize - 1) / w.blocksize;
  l.blocks_per_rank = (l.blocks + ranks - 1) / ranks;
  l.bytes_per_block = w.blocksize / 2;
  return l;
}

// Elements [start, start + length) of the 1-D `t`, those past its end zeros.
Tensor padded_part(const Tensor& t, int64_t start, int64_t length) {
  Tensor out = at::zeros({length}, t.options());
  const int64_t have = std::max<int64_t>(0, std::min(length, t.numel() - start));
  if (have > 0) out.narrow(0, 0, have).copy_(t.narrow(0, start, have));
  return out;
}

// Every rank's 1-D `part` joined, cut to `length`.
Tensor gathered(const Tensor& part, int64_t length, Communicator& group) {
  Tensor whole = at::empty({part.numel() * group.size()}, part.options());
  group.all_gather_into(whole, part.contiguous());
  return whole.narrow(0, 0, length);
}

}  // namespace

FourBitShard shard_four_bit(const FourBitWeight& w, int64_t rank, int64_t ranks) {
  check_four_bit_weight(w, "4-bit sharding");
  TORCH_CHECK(rank >= 0 && rank < ranks, "4-bit sharding: rank ", rank, " of ", ranks);
  const Layout l = layout_of(w, ranks);
  FourBitShard s;
  s.part = w;
  s.quant_storage = w.packed.scalar_type();
  s.ranks = ranks;
  const Tensor bytes = (w.packed.scalar_type() == at::kByte ? w.packed : w.packed.view(at::kByte)).reshape(-1);
  const int64_t part_bytes = l.blocks_per_rank * l.bytes_per_block;
  s.part.packed = padded_part(bytes, rank * part_bytes, part_bytes);
  s.part.absmax = padded_part(w.absmax.reshape(-1), rank * l.blocks_per_rank, l.blocks_per_rank);
  return s;
}

void check_four_bit_shard(const FourBitShard& s, const std::string& where) {
  const FourBitWeight& w = s.part;
  TORCH_CHECK(!w.shape.empty(), where, ": the sharded 4-bit weight has no shape");
  const Layout l = layout_of(w, s.ranks);
  TORCH_CHECK(w.packed.defined() && w.packed.scalar_type() == at::kByte && w.packed.dim() == 1 &&
                  w.packed.numel() == l.blocks_per_rank * l.bytes_per_block,
              where, ": a shard of a 4-bit weight of shape ", c10::IntArrayRef(w.shape), " over ", s.ranks,
              " ranks holds ", l.blocks_per_rank * l.bytes_per_block, " uint8 bytes, got ",
              w.packed.defined() ? w.packed.sizes() : at::IntArrayRef{});
  TORCH_CHECK(w.absmax.defined() && w.absmax.dim() == 1 && w.absmax.numel() == l.blocks_per_rank, where,
              ": a shard holds the absmax of ", l.blocks_per_rank, " blocks, got ",
              w.absmax.defined() ? w.absmax.numel() : 0);
}

FourBitWeight gather_four_bit(const FourBitShard& s, Communicator& group) {
  TORCH_CHECK(group.size() == s.ranks, "4-bit sharding: a shard of ", s.ranks, " ranks gathered over a group of ",
              group.size());
  const Layout l = layout_of(s.part, s.ranks);
  FourBitWeight w = s.part;
  Tensor bytes = gathered(s.part.packed, l.bytes, group);
  if (s.quant_storage != at::kByte) bytes = bytes.view(s.quant_storage);
  w.packed = bytes.view({-1, 1});
  w.absmax = gathered(s.part.absmax, l.blocks, group);
  return w;
}

}  // namespace accel::quant
