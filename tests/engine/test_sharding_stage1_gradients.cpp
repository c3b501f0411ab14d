// Stage 1's gradient slices: each rank's slice of a flat parameter's
// all-reduced gradient is a view of its gradient bucket (no copy of a
// shard's size each step), with the averaged values and zeros in the
// padding; a parameter without a gradient makes it a copy again, with zeros
// in that parameter's place.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <vector>

#include "engine/comm/communicator.h"
#include "engine/optim/adam.h"
#include "engine/parallel/flat_parameter.h"
#include "engine/parallel/sharded_model.h"
#include "tests/engine/joined_ranks.h"

namespace {

// 6 + 4 elements: on 3 ranks shards of 4, the last two elements padding.
std::vector<at::Tensor> parameters() {
  return {at::arange(6, at::kFloat).reshape({2, 3}).requires_grad_(), at::full({4}, 7.0f).requires_grad_()};
}

// Rank r's loss gives parameter 0 the gradient (r + 1) everywhere and
// parameter 1 the gradient 2 (r + 1) (when `use_second`).
void backward(accel::ShardedModel& model, const std::vector<at::Tensor>& params, int rank, bool use_second) {
  model.set_sync(true);
  model.caller_finishes_backward();
  at::Tensor loss = params[0].sum() * (rank + 1);
  if (use_second) loss = loss + params[1].sum() * 2 * (rank + 1);
  loss.backward();
  model.end_backward();
  model.finalize(0);
}

}  // namespace

TEST_CASE("stage 1 takes each rank's gradient slice as a view of its bucket") {
  auto codes = accel::testing::run_ranks(3, [](int rank, accel::Communicator& comm) {
    std::vector<at::Tensor> params = parameters();
    accel::optim::AdamW optimizer(params, {{"lr", 0.1}});
    accel::ShardedModel model(comm, 1, {params}, optimizer, 1 << 20, at::kCPU);
    model.shard_optimizer(optimizer);
    CHILD_CHECK(model.num_flat_parameters() == 1);
    accel::FlatParameter& flat = model.flat_parameter(0);
    // Ranks give (r + 1) and 2 (r + 1): averaged over 3 ranks, 2 and 4.
    at::Tensor expected = at::zeros({12});
    for (size_t i = 0; i < 2; ++i) {
      expected.narrow(0, flat.offset(i), flat.param_numel(i)).fill_(flat.params()[i].numel() == 6 ? 2.0f : 4.0f);
    }
    const at::Tensor mine = expected.narrow(0, rank * 4, 4);

    backward(model, params, rank, true);
    model.before_step();
    const at::Tensor& grad = flat.shard().grad();
    CHILD_CHECK(grad.defined() && grad.equal(mine));
    CHILD_CHECK(grad.is_alias_of(params[0].grad()) && grad.is_alias_of(params[1].grad()));
    optimizer.step();
    model.after_step();
    CHILD_CHECK(!flat.shard().grad().defined());

    // Parameter 1 unused on every rank: no gradient, so its place is zeros in
    // a slice of its own.
    model.zero_grad(true);
    backward(model, params, rank, false);
    CHILD_CHECK(!params[1].grad().defined());
    model.before_step();
    for (size_t i = 0; i < 2; ++i) {
      if (flat.params()[i].is_same(params[1])) expected.narrow(0, flat.offset(i), flat.param_numel(i)).zero_();
    }
    const at::Tensor& copied = flat.shard().grad();
    CHILD_CHECK(copied.defined() && copied.equal(expected.narrow(0, rank * 4, 4)));
    CHILD_CHECK(!copied.is_alias_of(params[0].grad()));
  });
  REQUIRE(codes == std::vector<int>{0, 0, 0});
}
