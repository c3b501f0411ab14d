#include "engine/parallel/expert_exchange.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <vector>

#include "engine/comm/communicator.h"
#include "engine/comm/point_to_point.h"
#include "engine/parallel/held_group.h"

namespace accel {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Transfers of its own tag, so that they never match a pipeline's
// (engine/comm/tensor_exchange.h) or a ring's on the same group.
constexpr int kTag = 3;

std::vector<int64_t> totals(const Tensor& counts) {
  Tensor per_rank = counts.sum(1).to(at::kLong).contiguous();
  return std::vector<int64_t>(per_rank.data_ptr<int64_t>(), per_rank.data_ptr<int64_t>() + per_rank.numel());
}

// x's rows, `sent[r]` of them in order to each group rank r; `got[r]` from
// each rank r, joined in rank order.
Tensor moved(const Tensor& x, const std::vector<int64_t>& sent, const std::vector<int64_t>& got, Communicator& group) {
  const int me = group.rank();
  Tensor in = x.contiguous();
  std::vector<int64_t> sizes = in.sizes().vec();
  int64_t rows = 0;
  for (int64_t n : got) rows += n;
  sizes[0] = rows;
  Tensor out = at::empty(sizes, in.options());
  PointToPoint& p2p = point_to_point(group);
  std::vector<std::unique_ptr<PendingOp>> pending;
  std::vector<Tensor> parts;  // kept alive until their transfers complete
  int64_t from_in = 0;
  int64_t from_out = 0;
  for (int r = 0; r < group.size(); ++r) {
    Tensor outgoing = in.narrow(0, from_in, sent[r]);
    Tensor incoming = out.narrow(0, from_out, got[r]);
    from_in += sent[r];
    from_out += got[r];
    if (r == me) {
      incoming.copy_(outgoing);
      continue;
    }
    if (got[r] > 0) {
      pending.push_back(p2p.irecv(incoming, r, kTag));
      parts.push_back(incoming);
    }
    if (sent[r] > 0) {
      pending.push_back(p2p.isend(outgoing, r, kTag));
      parts.push_back(outgoing);
    }
  }
  for (auto& op : pending) op->wait();
  return out;
}

struct ExchangeRows : public torch::autograd::Function<ExchangeRows> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& counts, const Tensor& received,
                        std::shared_ptr<Communicator> group) {
    std::vector<int64_t> sent = totals(counts);
    std::vector<int64_t> got = totals(received);
    ctx->saved_data["sent"] = sent;
    ctx->saved_data["got"] = got;
    Tensor out = moved(x, sent, got, *group);
    hold_group(ctx, std::move(group));
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<int64_t> sent = ctx->saved_data["sent"].toIntVector();
    const std::vector<int64_t> got = ctx->saved_data["got"].toIntVector();
    return {moved(grads[0], got, sent, held_group(ctx)), Tensor(), Tensor(), Tensor()};
  }
};

void check_counts(const Tensor& counts, const Communicator& group, const char* what) {
  TORCH_CHECK(counts.dim() == 2 && counts.size(0) == group.size(), "expert exchange: ", what,
              " must be [group size, parts] = [", group.size(), ", parts], not ", counts.sizes());
  TORCH_CHECK(!at::isFloatingType(counts.scalar_type()) && counts.scalar_type() != at::kBool, "expert exchange: ",
              what, " must be integers, not ", counts.scalar_type());
  TORCH_CHECK(counts.numel() == 0 || counts.min().item<int64_t>() >= 0, "expert exchange: ", what,
              " has a negative count");
}

}  // namespace

Tensor exchange_counts(const Tensor& counts, Communicator& group) {
  check_counts(counts, group, "counts");
  at::NoGradGuard no_grad;
  Tensor mine = counts.to(at::kCPU, at::kLong).contiguous();
  std::vector<Tensor> everyone = group.all_gather(mine);
  std::vector<Tensor> rows;
  for (const Tensor& theirs : everyone) rows.push_back(theirs.view(mine.sizes())[group.rank()]);
  return at::stack(rows);
}

Tensor exchange_rows(const Tensor& x, const Tensor& counts, const Tensor& received,
                     std::shared_ptr<Communicator> group) {
  check_counts(counts, *group, "counts");
  check_counts(received, *group, "received counts");
  const int64_t total = counts.sum().item<int64_t>();
  TORCH_CHECK(x.dim() >= 1 && total == x.size(0), "expert exchange: the counts send ", total,
              " rows, and the tensor of sizes ", x.sizes(), " has ", x.dim() >= 1 ? x.size(0) : 0);
  return ExchangeRows::apply(x, counts, received, std::move(group));
}

}  // namespace accel
