// A sharded model whose ranks other than 0 give parameters on the meta device
// (built under accel.init_empty_weights): every rank's flat parameters take
// rank 0's values, the meta parameters are replaced by new leaf tensors the
// optimizer is pointed past, and rank 0 itself may give no meta parameter.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <memory>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/optim/adam.h"
#include "engine/parallel/flat_parameter.h"
#include "engine/parallel/sharded_model.h"
#include "tests/engine/joined_ranks.h"

namespace {

// Two parameters, rank 0's with values, the others' on the meta device.
std::vector<at::Tensor> parameters(int rank) {
  if (rank == 0) {
    return {at::arange(6, at::kFloat).reshape({2, 3}).requires_grad_(), at::full({4}, 7.0f).requires_grad_()};
  }
  auto meta = at::TensorOptions().dtype(at::kFloat).device(at::kMeta);
  return {at::empty({2, 3}, meta).requires_grad_(), at::empty({4}, meta).requires_grad_()};
}

}  // namespace

TEST_CASE("ranks given meta parameters take rank 0's values, unit by unit") {
  for (int stage : {2, 3}) {
    auto codes = accel::testing::run_ranks(3, [&](int rank, accel::Communicator& comm) {
      std::vector<at::Tensor> given = parameters(rank);
      accel::optim::AdamW optimizer(given, {{"lr", 0.1}});
      // At stage 3 each parameter is a unit of its own.
      std::vector<std::vector<at::Tensor>> units =
          stage == 3 ? std::vector<std::vector<at::Tensor>>{{}, {given[0]}, {given[1]}}
                     : std::vector<std::vector<at::Tensor>>{{given[0], given[1]}};
      accel::ShardedModel model(comm, stage, units, optimizer, 1 << 20, at::kCPU);
      const auto now = model.unit_parameters();
      std::vector<at::Tensor> params = stage == 3 ? std::vector<at::Tensor>{now[1][0], now[2][0]} : now[0];
      for (size_t i = 0; i < params.size(); ++i) {
        // Rank 0's are its own tensors; the others' new leaves over the flat buffers.
        CHILD_CHECK(params[i].is_same(given[i]) == (rank == 0));
        CHILD_CHECK(!params[i].is_meta() && params[i].is_leaf() && params[i].requires_grad());
      }
      model.shard_optimizer(optimizer);
      for (const at::Tensor& p : optimizer.param_groups()[0].params) CHILD_CHECK(!p.is_meta());
      CHILD_CHECK(optimizer.param_groups()[0].params.size() == (stage == 3 ? 2u : 1u));
      model.gather_all();
      CHILD_CHECK(params[0].equal(at::arange(6, at::kFloat).reshape({2, 3})));
      CHILD_CHECK(params[1].equal(at::full({4}, 7.0f)));
      model.release_all();
      // At stage 3 the full buffers are released again: the parameters are empty.
      CHILD_CHECK((params[0].numel() == 0) == (stage == 3));
    });
    REQUIRE(codes == std::vector<int>{0, 0, 0});
  }
}

TEST_CASE("a meta parameter on rank 0 is refused: it has no values to give") {
  accel::ProcessState state;
  auto comm = accel::make_communicator(state, {});
  std::vector<at::Tensor> params = parameters(1);
  REQUIRE_THROWS_WITH(accel::FlatParameter(*comm, params, true, at::kCPU),
                      Catch::Contains("a parameter of shape [2, 3] is on the meta device on rank 0"));
}
