// Ring attention, context parallelism's attention: each rank of a cp group
// holds its part of a sequence's queries, keys and values; the keys and
// values travel around the group's ring (engine/parallel/ring_shift.h,
// size - 1 turns), each rank attending to every part that passes by, and the
// partial results merge by their log-sum-exp (the online softmax of flash
// attention), so each rank ends with its queries' attention over the whole
// sequence. Plain differentiable ATen ops and the ring shift: autograd
// derives the backward, the gradients of keys and values travelling back
// around the ring.
//
// Causal attention takes the load-balanced layout (Megatron-LM's and
// torchtitan's): the sequence cut in 2 x size chunks, rank r holding chunks
// r and 2 x size - 1 - r, in that order (lua/accel/parallel/
// context_parallel_layout.lua makes it). Then every rank does the same work
// at every turn: its own part causally, then, from a rank before it, all of
// its queries against that rank's first chunk, and from a rank after it, its
// second chunk of queries against both of that rank's; no other pair of
// chunks has a visible key, and no block is masked but the first.
//
// Packed rows (several documents one after another, as padding-free
// training gives them) pass their position_ids: a document is a run of
// positions counting up by one, and no query sees a key of another. A
// token's document is named by where its position 0 falls in the whole
// sequence (its index there minus its position), which every rank computes
// for its own tokens from the layout; those names travel around the ring
// beside the keys. Two runs are one document when they name the same start
// (positions that jump up rather than restart), which
// context_parallel_split refuses.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <memory>

namespace accel {

class Communicator;

struct RingAttentionOptions {
  bool causal = true;
  c10::optional<double> scale;  // 1 / sqrt(E) when absent
  // (B, L) or (1, L) int64: this rank's tokens' positions within their
  // documents; undefined: one document. Causal only.
  at::Tensor position_ids;
};

// q (B, H, L, E), k (B, Hkv, L, E), v (B, Hkv, L, Ev): this rank's part of
// the sequence (L even when causal: its two chunks). H a multiple of Hkv
// (grouped-query attention: H / Hkv query heads in a row share a key/value
// head). Returns (B, H, L, Ev), as scaled dot-product attention over the
// whole sequence gives for these queries. Every group rank calls it with
// the same shapes. Computed in float32 for lower-precision inputs.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          std::shared_ptr<Communicator> group, const RingAttentionOptions& options);

}  // namespace accel
