// Averages parameter gradients across ranks while backward is still running,
// the way DDP does. It exists at every world size, so that the Accelerator
// hands every synchronised step to it alike; alone, it copies nothing and
// only divides by the items counted (see finalize).
//
// Parameters are grouped into buckets of at most `bucket_bytes`, last layer
// first (backward produces those gradients first). A hook on each
// parameter's gradient accumulator copies the gradient into its bucket as
// soon as autograd has produced it; a full bucket's all-reduce starts at
// once, asynchronously, so communication overlaps the rest of backward
// (through shared memory, engine/comm/shared_memory_all_reduce.h, it completes
// there and then: it takes microseconds, not a network's milliseconds).
// Buckets start in the same order on every rank. finalize() waits for all of
// them and writes the results back into the gradients.
//
// Parameters that got no gradient this backward (unused in the forward)
// contribute zeros; each bucket also carries one "used" flag per parameter,
// so a parameter unused on every rank keeps no gradient, exactly as in a
// single-process run, without an extra collective. The last bucket also
// carries this rank's item count (backward{num_items}): it starts in
// finalize(), once the count is known, so the all-ranks count costs no
// collective of its own either.
//
// Note [gradients as bucket views]: after a parameter's first synchronised
// gradient, its .grad is its slot in its bucket (DDP's
// gradient_as_bucket_view), so gradients and buckets are one copy, not two:
// autograd accumulates into the slot in place, the all-reduce reduces it
// there and finalize divides it there. A gradient replaced meanwhile
// (zero_grad setting it to None, a backward with create_graph) is copied
// into its slot when its hook runs and then replaced by the slot, so the
// extra copy lives only until then. Whoever keeps a parameter's gradient
// keeps its bucket's slot; the sharded model's stage 1 lays its buckets out
// as its flat parameters and takes each rank's slice as a view of one
// (engine/parallel/flat_parameter.h).
#pragma once
#include <ATen/core/Tensor.h>

#include "engine/parallel/gradient_sync.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace accel {

class Communicator;

class GradientReducer : public GradientSync {
 public:
  static constexpr int64_t kDefaultBucketBytes = 25 * 1024 * 1024;

  // With overlap false, buckets wait until finalize(): the all-reduce runs
  // after backward, for comparison in benchmarks.
  GradientReducer(Communicator& comm, std::vector<at::Tensor> params,
                  int64_t bucket_bytes = kDefaultBucketBytes, bool overlap = true);
  // Buckets chosen by the caller, in the order they start: each holds its
  // parameters' gradients one after the other from element 0, in the order
  // given, then zeros up to `numel` (padding, never written). Stage 1 of the
  // sharded model gives its flat parameters, so that a rank's slice of a
  // flat parameter's gradient is a view of its bucket (gradient_bucket).
  struct BucketLayout {
    std::vector<at::Tensor> params;
    int64_t numel = 0;  // at least the parameters' elements
  };
  GradientReducer(Communicator& comm, std::vector<BucketLayout> buckets);
  ~GradientReducer() override;  // removes its hooks
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Whether the next backward synchronises. When false, the hooks do nothing
  // and gradients only accumulate locally (no_sync, non-sync micro-steps).
  void set_sync(bool sync) override;
  bool sync() const override;
  void caller_finishes_backward() override;
  // The hooks and finalize() do the work; this ends an announced backward.
  void end_backward() override;

  // After a synchronising backward: starts the buckets still waiting (those
  // holding parameters without a gradient, and the last one), waits for
  // every bucket, and writes back into each gradient the sum over ranks
  // divided by the items of all ranks, where `num_items` is this rank's
  // count since the last synchronisation (0 when it counts none), or by the
  // number of ranks when no rank counted any. Throws when a bucket's
  // all-reduce failed.
  void finalize(int64_t num_items = 0) override;

  int64_t num_buckets() const;
  // Bucket k's gradient elements (its layout's numel; no used flags), each
  // parameter's gradient a view of it once synchronised (Note [gradients as
  // bucket views]). Undefined for a process alone, which keeps no buckets.
  at::Tensor gradient_bucket(size_t k) const;

  // What happened during the last synchronising backward, in order: which
  // parameter's gradient became ready, which bucket's all-reduce started.
  struct Event {
    enum class Kind { GradientReady, BucketStarted };
    Kind kind;
    int64_t index;  // parameter index (in the order given) or bucket index
  };
  std::vector<Event> last_events() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel
