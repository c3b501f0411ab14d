#include "engine/parallel/ring_attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <vector>

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

// The lowest finite number of a floating dtype.
double lowest_of(at::ScalarType type) {
  switch (type) {
    case at::kDouble:
      return std::numeric_limits<double>::lowest();
    case at::kBFloat16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::lowest());
    case at::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::lowest());
    default:
      return static_cast<double>(std::numeric_limits<float>::lowest());
  }
}

// q (B, H, Lq, E) against k (B, Hkv, S, E) and v. The query heads that share
// a key/value head are laid end to end along the length, (B, Hkv, G * Lq, E),
// so k and v are never repeated. `blocked` (Lq, S) or (B, 1, Lq, S), true
// where a key is hidden, or undefined. A hidden key scores the lowest
// finite number, not -inf: a query may see no key of a block (all of another
// document's), and then its softmax there is uniform and its log-sum-exp so
// low that merging gives the block no weight, where -inf would give NaN. The
// scores are scaled and masked in place: matmul keeps its inputs for
// backward, not its output.
Partial attend(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& blocked, double scale) {
  const int64_t batch = q.size(0), heads = q.size(1), length = q.size(2), groups = heads / k.size(1);
  Tensor scores = at::matmul(q.reshape({batch, k.size(1), groups * length, q.size(3)}), k.transpose(-2, -1));
  scores.mul_(scale);
  if (blocked.defined()) {
    std::vector<int64_t> times(blocked.dim(), 1);
    times[blocked.dim() - 2] = groups;
    scores.masked_fill_(blocked.repeat(times), lowest_of(scores.scalar_type()));
  }
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

// The documents of this rank's tokens (B, L): each named by the index in
// the whole sequence of its position 0 (the token's index minus its
// position), so that every rank names a document alike. The rank holds
// chunks rank and 2 x size - 1 - rank of the sequence (the layout).
Tensor document_starts(const Tensor& positions, int64_t batch, int64_t length, int rank, int size) {
  TORCH_CHECK(positions.dim() == 2 && (positions.size(0) == 1 || positions.size(0) == batch) &&
                  positions.size(1) == length && !positions.is_floating_point(),
              "ring attention: position_ids must be integer (batch, length) = (", batch, ", ", length,
              ") or (1, length), got ", shape_text(positions.sizes()), " of ", positions.scalar_type());
  const int64_t half = length / 2;
  const auto options = positions.options().dtype(at::kLong);
  Tensor index = at::cat({at::arange(rank * half, (rank + 1) * half, options),
                          at::arange((2 * size - 1 - rank) * half, (2 * size - rank) * half, options)});
  return (index.unsqueeze(0) - positions.to(at::kLong)).expand({batch, length}).contiguous();
}

// (B, 1, Lq, S), true where query and key are of different documents; or
// undefined without documents.
Tensor other_document(const Tensor& query_documents, const Tensor& key_documents) {
  if (!query_documents.defined()) return Tensor();
  return query_documents.unsqueeze(2).ne(key_documents.unsqueeze(1)).unsqueeze(1);
}

Tensor either(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return a.logical_or(b);
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
  TORCH_CHECK(!options.position_ids.defined() || options.causal,
              "ring attention: position_ids (packed documents) need causal attention");
  // The documents of our queries, and of the keys passing by (they travel
  // with them: a small second exchange a turn).
  const Tensor documents = options.position_ids.defined()
                               ? document_starts(options.position_ids, q.size(0), length, rank, size)
                               : Tensor();
  Tensor key_documents = documents;
  Partial total;
  for (int step = 0; step < size; ++step) {
    if (step > 0) {
      kv = ring_shift(kv, group);
      if (documents.defined()) key_documents = ring_shift(key_documents, group);
    }
    const Tensor keys = kv.narrow(-1, 0, features), values = kv.narrow(-1, features, v.size(-1));
    const int source = (rank - step + size) % size;  // whose keys these are
    if (step == 0) {
      total = attend(queries, keys, values,
                     options.causal ? either(nn::causal_mask(length, length, q.options()),
                                             other_document(documents, key_documents))
                                    : Tensor(),
                     scale);
    } else if (!options.causal) {
      total = merged(total, attend(queries, keys, values, Tensor(), scale));
    } else if (source < rank) {  // its first chunk precedes both of ours; its second follows both
      const Tensor blocked =
          documents.defined() ? other_document(documents, key_documents.narrow(1, 0, half)) : Tensor();
      total = merged(total, attend(queries, keys.narrow(2, 0, half), values.narrow(2, 0, half), blocked, scale));
    } else {  // both of its chunks precede our second and follow our first
      const Tensor blocked =
          documents.defined() ? other_document(documents.narrow(1, half, half), key_documents) : Tensor();
      total = merged_from(total, half, attend(queries.narrow(2, half, half), keys, values, blocked, scale));
    }
  }
  return reduced ? total.out.to(q.scalar_type()) : total.out;
}

}  // namespace accel
