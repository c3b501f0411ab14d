// FSDP's MixedPrecisionPolicy, as the engine's sharded data parallel applies
// it at stage 3 (docs/api/sharding.md, "Mixed precision"): the shards the
// optimizer steps keep the parameters' dtype; the all-gathered parameters,
// and so the forward and backward, are in param_dtype (each rank casts its
// shard before the all-gather, so the gather carries param_dtype's bytes);
// gradients are reduce-scattered in reduce_dtype and land in the shards'
// gradients in the shards' dtype. Unset fields keep FSDP's defaults:
// param_dtype the parameters' own, reduce_dtype param_dtype.
#pragma once
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

namespace accel {

struct MixedPrecisionPolicy {
  c10::optional<c10::ScalarType> param_dtype;
  c10::optional<c10::ScalarType> reduce_dtype;
};

}  // namespace accel
