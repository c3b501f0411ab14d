// The linear layer of a 4-bit weight (bnb.nn.Linear4bit's forward):
// y = x W^T + b with W decoded from its 4-bit codes in the compute dtype
// for this product only. Backward keeps nothing but the 4-bit weight itself
// (no decoded copy): it decodes W again for the input's gradient. The
// weight is frozen, as in QLoRA: no gradient reaches it (the bias, a plain
// tensor, gets one when it requires it).
//
// Sharded (four_bit_shards.h), the layer all-gathers the whole weight from
// the group's shards for its forward and again for its backward, keeping
// only this rank's shard in between, as FSDP gathers a unit's float
// parameters around its forward and its backward.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Optional.h>

#include <memory>

#include "engine/quant/four_bit_shards.h"
#include "engine/quant/four_bit_weight.h"

namespace accel {
class Communicator;
}

namespace accel::quant {

// x (..., in_features) -> (..., out_features) in x's dtype; computed in
// compute_dtype (x and the bias converted to it, as bitsandbytes does).
at::Tensor linear_4bit(const at::Tensor& x, const FourBitWeight& weight, const c10::optional<at::Tensor>& bias,
                       at::ScalarType compute_dtype);
at::Tensor linear_4bit(const at::Tensor& x, const FourBitShard& weight, std::shared_ptr<Communicator> group,
                       const c10::optional<at::Tensor>& bias, at::ScalarType compute_dtype);

}  // namespace accel::quant
