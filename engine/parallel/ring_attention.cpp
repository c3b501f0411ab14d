#include "engine/parallel/ring_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "engine/comm/communicator.h"
#include "engine/nn/attention.h"
#include "engine/parallel/ring_shift.h"
#include "engine/tensor_description.h"

namespace accel {
namespace {

using at::Tensor;

// The attention of some queries over some of the keys: the output and the
// log-sum-exp of each query's scores (B, H, Lq, 1), which says how much
// weight those keys take when merged with the others.
struct Partial {
  Tensor out;
  Tensor lse;
};

// q (B, H, Lq, E) against k (B, Hkv, S, E) and v. The query heads that share
// a key/value head are laid end to end along the length, (B, Hkv, G * Lq, E),
// so k and v are never repeated. `blocked` (Lq, S), true where a key is
// hidden, or undefined; no row is hidden whole (the layout sees to it), so
// no log-sum-exp is -inf. The scores are scaled and masked in place: matmul
// keeps its inputs for backward, not its output.
Partial attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale) {
  const int64_t batch = q.size(0), heads = q.size(1), length = q.size(2), groups = heads / k.size(1);
  Tensor scores = at::matmul(q.reshape({batch, k.size(1), groups * length, q.size(3)}), k.transpose(-2, -1));
  scores.mul_(scale);
  if (blocked.defined()) scores.masked_fill_(blocked.repeat({groups, 1}), -std::numeric_limits<double>::infinity());
  Tensor out = at::matmul(at::softmax(scores, -1), v);
  return {out.view({batch, heads, length, v.size(-1)}),
          at::logsumexp(scores, -1, true).view({batch, heads, length, 1})};
}

// Two partial results of the same queries over disjoint keys, as one: each
// weighted by its share of the exponentials' total.
Partial merged(const Partial& a, const Partial& b) {
  Tensor lse = at::logaddexp(a.lse, b.lse);
  return {a.out * at::exp(a.lse - lse) + b.out * at::exp(b.lse - lse), lse};
}

// `p` with its rows from `first` on (along the length) merged with `late`.
Partial merged_from(const Partial& p, int64_t first, const Partial& late) {
  const int64_t length = p.out.size(2);
  Partial tail = merged({p.out.narrow(2, first, length - first), p.lse.narrow(2, first, length - first)}, late);
  return {at::cat({p.out.narrow(2, 0, first), tail.out}, 2), at::cat({p.lse.narrow(2, 0, first), tail.lse}, 2)};
}

void check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  const auto shapes = [&] {
    return shape_text(q.sizes()) + ", " + shape_text(k.sizes()) + " and " + shape_text(v.sizes());
  };
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "ring attention: q, k and v must be (batch, heads, length, features), got shapes ", shapes());
  TORCH_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(2) == q.size(2) &&
                  v.size(2) == q.size(2) && v.size(1) == k.size(1) && k.size(3) == q.size(3),
              "ring attention: q, k and v must have one batch and length, k and v one head count, q and k one "
              "feature width; got shapes ", shapes());
  TORCH_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "ring attention: q's ", q.size(1),
              " heads must be a multiple of k's and v's ", k.size(1));
  TORCH_CHECK(!causal || q.size(2) % 2 == 0, "ring attention: causally each rank holds two chunks of the "
              "sequence (the load-balanced layout), so its length must be even, got ", q.size(2));
}

}  // namespace

Tensor ring_attention(const Tensor& q, const Tensor& k, const Tensor& v, std::shared_ptr<Communicator> group,
                      const RingAttentionOptions& options) {
  check_shapes(q, k, v, options.causal);
  const bool reduced = q.is_floating_point() && q.element_size() < 4;
  const auto computed = [&](const Tensor& t) { return reduced ? t.to(at::kFloat) : t; };
  const Tensor queries = computed(q);
  const int64_t features = q.size(3), length = q.size(2), half = length / 2;
  const double scale = options.scale.value_or(1.0 / std::sqrt(static_cast<double>(features)));
  // Keys and values travel together: one exchange per turn.
  Tensor kv = at::cat({computed(k), computed(v)}, -1);
  const int size = group->size(), rank = group->rank();
  Partial total;
  for (int step = 0; step < size; ++step) {
    if (step > 0) kv = ring_shift(kv, group);
    const Tensor keys = kv.narrow(-1, 0, features), values = kv.narrow(-1, features, v.size(-1));
    const int source = (rank - step + size) % size;  // whose keys these are
    if (step == 0) {
      total = attend(queries, keys, values, options.causal ? nn::causal_mask(length, length, q.options()) : Tensor(),
                     scale);
    } else if (!options.causal) {
      total = merged(total, attend(queries, keys, values, Tensor(), scale));
    } else if (source < rank) {  // its first chunk precedes both of ours; its second follows both
      total = merged(total, attend(queries, keys.narrow(2, 0, half), values.narrow(2, 0, half), Tensor(), scale));
    } else {  // both of its chunks precede our second and follow our first
      total = merged_from(total, half, attend(queries.narrow(2, half, half), keys, values, Tensor(), scale));
    }
  }
  return reduced ? total.out.to(q.scalar_type()) : total.out;
}

}  // namespace accel
