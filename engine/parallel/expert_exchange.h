// Expert parallelism's exchange of tokens over an ep group (torch.distributed's
// all_to_all_single with split sizes, as an autograd function): each rank
// sends consecutive runs of its rows to the ranks holding their experts, and
// gets back, in rank order, the rows every rank sent it; backward sends the
// rows' gradients back the way they came (lua/accel/parallel/expert_parallel.lua
// dispatches a mixture of experts' tokens through it and combines them back).
//
// The counts travel first (one all-gather of every rank's counts), so that
// every receive is posted with the size its sender sends; the rows then go
// over the group's point-to-point transfers (engine/comm/point_to_point.h),
// all in flight at once, a rank's own runs copied.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>

namespace accel {

class Communicator;

// `counts`: int64 [group size, parts]: how many rows this rank sends to each
// group rank, in `parts` runs each (one per expert that rank holds, say),
// the same shape on every rank. Returns int64 [group size, parts]: the
// counts each rank sends to this one. Negative counts are refused.
at::Tensor exchange_counts(const at::Tensor& counts, Communicator& group);

// The rows of `x` (dim 0) sent to each group rank as `counts` (from
// exchange_counts' caller: [group size, parts]) says, in order, and the rows
// each rank sends here (`received`, what exchange_counts returned), joined
// in rank order. A count total other than x's rows is refused, naming both.
at::Tensor exchange_rows(const at::Tensor& x, const at::Tensor& counts, const at::Tensor& received,
                         std::shared_ptr<Communicator> group);

}  // namespace accel
