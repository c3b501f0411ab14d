// Activation checkpointing in the engine alone (engine/activation_checkpoint.h):
// gradients equal the uncheckpointed ones bit for bit with dropout on, each
// parameter's accumulator runs once in the outer pass (a parameter used
// inside and outside a block too), random state is forked, nesting,
// tensors from outside the block, backward on another thread, and the
// errors of a recomputation that cannot be right; and on two ranks, the
// data-parallel reducer sees each gradient once and averages what an
// uncheckpointed run averages.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <map>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine/activation_checkpoint.h"
#include "engine/parallel/gradient_reducer.h"
#include "tests/engine/joined_ranks.h"

namespace {

using Tensors = std::vector<at::Tensor>;

// Blocks of x + W2 dropout(gelu(W1 x + b1)), their weights leaves.
struct Net {
  std::vector<Tensors> blocks;
  explicit Net(int depth, int width = 8) {
    at::manual_seed(5);
    for (int i = 0; i < depth; ++i) {
      blocks.push_back({(at::randn({2 * width, width}) / 3).requires_grad_(), at::randn({2 * width}).requires_grad_(),
                        (at::randn({width, 2 * width}) / 3).requires_grad_()});
    }
  }
  Tensors params() const {
    Tensors out;
    for (const Tensors& b : blocks) out.insert(out.end(), b.begin(), b.end());
    return out;
  }
};

at::Tensor block(const Tensors& w, const at::Tensor& x) {
  at::Tensor h = at::dropout(at::gelu(at::linear(x, w[0], w[1])), 0.3, /*train=*/true);
  return x + at::linear(h, w[2]);
}

accel::CheckpointedBlock as_block(const Tensors& w) {
  return [w](const Tensors& in) { return Tensors{block(w, in[0])}; };
}

at::Tensor forward(const Net& net, const at::Tensor& x, bool checkpointed) {
  at::Tensor h = x;
  for (const Tensors& w : net.blocks) {
    h = checkpointed ? accel::checkpoint({h}, as_block(w), as_block(w))[0] : block(w, h);
  }
  return h.pow(2).mean();
}

// The gradients of the net's parameters and of x after one backward, its
// dropout drawn from `dropout_seed`.
Tensors gradients(const Net& net, bool checkpointed, uint64_t dropout_seed = 7) {
  at::Tensor x = at::randn({4, 8}).requires_grad_();
  for (at::Tensor p : net.params()) p.mutable_grad().reset();
  at::manual_seed(dropout_seed);
  forward(net, x, checkpointed).backward();
  Tensors out;
  for (const at::Tensor& p : net.params()) out.push_back(p.grad().clone());
  out.push_back(x.grad().clone());
  return out;
}

bool all_equal(const Tensors& a, const Tensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].defined() || !b[i].defined() || !a[i].equal(b[i])) return false;
  }
  return true;
}

// Counts the runs of each parameter's gradient accumulator (what the
// reducer's and the sharded model's hooks hang on).
struct AccumulatorRuns {
  std::map<const c10::TensorImpl*, int> runs;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks;
  explicit AccumulatorRuns(const Tensors& params) {
    for (const at::Tensor& p : params) {
      auto accumulator = torch::autograd::impl::grad_accumulator(p);
      const c10::TensorImpl* key = p.unsafeGetTensorImpl();
      runs[key] = 0;
      hooks.emplace_back(accumulator, accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
                                          [this, key](const torch::autograd::variable_list& outputs,
                                                      const torch::autograd::variable_list&) {
                                            ++runs[key];
                                            return outputs;
                                          })));
    }
  }
  ~AccumulatorRuns() {
    for (auto& [accumulator, key] : hooks) accumulator->del_post_hook(key);
  }
};

}  // namespace

TEST_CASE("checkpointed blocks give the uncheckpointed gradients bit for bit with dropout on") {
  Net net(6);
  at::manual_seed(1);
  Tensors plain = gradients(net, false);
  at::manual_seed(1);
  Tensors checkpointed = gradients(net, true);
  REQUIRE(all_equal(plain, checkpointed));
  // Dropout is on: other draws give other gradients.
  at::manual_seed(1);
  REQUIRE_FALSE(all_equal(plain, gradients(net, false, 8)));
}

TEST_CASE("recomputing draws nothing from the generator the recipe sees") {
  Net net(3);
  at::manual_seed(3);
  gradients(net, false);
  const double after_plain = at::rand({1}).item<double>();
  at::manual_seed(3);
  const auto before = accel::recomputation_counts().total;
  gradients(net, true);
  REQUIRE(accel::recomputation_counts().total - before == 3);
  REQUIRE(at::rand({1}).item<double>() == after_plain);
}

TEST_CASE("each parameter's accumulator runs once, in the outer pass") {
  Net net(4);
  // The last block's first weight is also used after the block (as a tied
  // weight would be): autograd sums both uses before its accumulator runs.
  auto run = [&](bool checkpointed) {
    for (at::Tensor p : net.params()) p.mutable_grad().reset();
    AccumulatorRuns counted(net.params());
    at::manual_seed(9);
    at::Tensor x = at::randn({4, 8});
    at::Tensor loss = forward(net, x, checkpointed) + net.blocks.back()[0].sum() * 0.5;
    loss.backward();
    for (const auto& [param, n] : counted.runs) REQUIRE(n == 1);
    Tensors grads;
    for (const at::Tensor& p : net.params()) grads.push_back(p.grad().clone());
    return grads;
  };
  REQUIRE(all_equal(run(false), run(true)));
}

TEST_CASE("tensors a block takes from outside get their gradients") {
  at::manual_seed(4);
  at::Tensor w = at::randn({8, 8}).requires_grad_();
  at::Tensor x = at::randn({2, 8}).requires_grad_();
  auto run = [&](bool checkpointed) {
    w.mutable_grad().reset();
    x.mutable_grad().reset();
    at::Tensor scale = w.sum() * 0.1;  // a non-leaf made before the block, used inside it
    auto body = [&](const Tensors& in) { return Tensors{at::tanh(at::matmul(in[0], w)) * scale}; };
    at::Tensor y = checkpointed ? accel::checkpoint({x}, body, body)[0] : body({x})[0];
    y.sum().backward();
    return Tensors{w.grad().clone(), x.grad().clone()};
  };
  REQUIRE(all_equal(run(false), run(true)));

  // One made by an earlier checkpointed block: that block's node runs in the
  // nested pass and again in the outer one, which finds what it saved still
  // there.
  Net net(2);
  auto skip = [&](bool checkpointed) {
    for (at::Tensor p : net.params()) p.mutable_grad().reset();
    at::manual_seed(6);
    at::Tensor x0 = at::randn({2, 8}).requires_grad_();
    const Tensors& w0 = net.blocks[0];
    at::Tensor h0 = checkpointed ? accel::checkpoint({x0}, as_block(w0), as_block(w0))[0] : block(w0, x0);
    auto second = [&](const Tensors& in) { return Tensors{block(net.blocks[1], in[0]) * h0}; };
    at::Tensor h1 = checkpointed ? accel::checkpoint({h0}, second, second)[0] : second({h0})[0];
    (h1.sum() + h0.sum()).backward();
    Tensors grads;
    for (const at::Tensor& p : net.params()) grads.push_back(p.grad().clone());
    grads.push_back(x0.grad().clone());
    return grads;
  };
  // Within rounding, not bit for bit: h0's share through the upvalue reaches
  // block 0's parameters through the nested pass, summed apart from the rest.
  const Tensors plain = skip(false), checkpointed = skip(true);
  for (size_t i = 0; i < plain.size(); ++i) REQUIRE(checkpointed[i].allclose(plain[i], 1e-6, 1e-5));
}

TEST_CASE("nested checkpoints") {
  Net net(4);
  auto nested = [&](const Net& n, const at::Tensor& x) {
    auto inner_half = [&](size_t from) {
      return [&n, from](const Tensors& in) {
        at::Tensor h = in[0];
        for (size_t i = from; i < from + 2; ++i) h = accel::checkpoint({h}, as_block(n.blocks[i]), as_block(n.blocks[i]))[0];
        return Tensors{h};
      };
    };
    at::Tensor h = accel::checkpoint({x}, inner_half(0), inner_half(0))[0];
    h = accel::checkpoint({h}, inner_half(2), inner_half(2))[0];
    return h.pow(2).mean();
  };
  at::manual_seed(1);
  Tensors plain = gradients(net, false);
  for (at::Tensor p : net.params()) p.mutable_grad().reset();
  at::manual_seed(1);
  at::Tensor x = at::randn({4, 8}).requires_grad_();
  at::manual_seed(7);
  nested(net, x).backward();
  Tensors got;
  for (const at::Tensor& p : net.params()) got.push_back(p.grad().clone());
  got.push_back(x.grad().clone());
  REQUIRE(all_equal(plain, got));
}

TEST_CASE("backward on another thread recomputes there") {
  Net net(2);
  at::manual_seed(1);
  Tensors plain = gradients(net, false);
  at::manual_seed(1);
  at::Tensor x = at::randn({4, 8}).requires_grad_();
  for (at::Tensor p : net.params()) p.mutable_grad().reset();
  at::manual_seed(7);
  at::Tensor loss = forward(net, x, true);
  const auto before = accel::recomputation_counts();
  std::thread([&] { loss.backward(); }).join();
  const auto after = accel::recomputation_counts();
  REQUIRE(after.total - before.total == 2);
  REQUIRE(after.on_other_threads - before.on_other_threads == 2);
  Tensors got;
  for (const at::Tensor& p : net.params()) got.push_back(p.grad().clone());
  got.push_back(x.grad().clone());
  REQUIRE(all_equal(plain, got));
}

TEST_CASE("a recomputation that fails or differs fails backward, saying why") {
  at::Tensor w = at::randn({4, 4}).requires_grad_();
  auto body = [&](const Tensors& in) { return Tensors{at::matmul(in[0], w)}; };

  SECTION("its error reaches backward") {
    auto failing = [](const Tensors&) -> Tensors { throw std::runtime_error("the block failed"); };
    at::Tensor y = accel::checkpoint({at::randn({2, 4})}, body, failing)[0];
    REQUIRE_THROWS_WITH(y.sum().backward(), Catch::Contains("the block failed"));
    // The random and autocast state came back on the way out.
    REQUIRE_FALSE(accel::recomputing_activations());
  }
  SECTION("other shapes") {
    auto other = [&](const Tensors& in) { return Tensors{at::matmul(in[0], w).narrow(1, 0, 2)}; };
    at::Tensor y = accel::checkpoint({at::randn({2, 4})}, body, other)[0];
    REQUIRE_THROWS_WITH(y.sum().backward(),
                        Catch::Contains("tensor result 1 was float32[2, 4]") && Catch::Contains("float32[2, 2]"));
  }
  SECTION("an input changed in place") {
    at::Tensor x = at::randn({2, 4});
    at::Tensor y = accel::checkpoint({x}, body, body)[0];
    x.add_(1);
    REQUIRE_THROWS_WITH(y.sum().backward(), Catch::Contains("tensor argument 1 (float32[2, 4]) was modified in place"));
  }
  SECTION("a second backward") {
    at::Tensor y = accel::checkpoint({at::randn({2, 4})}, body, body)[0].sum();
    y.backward(at::Tensor(), /*retain_graph=*/true);
    at::Tensor once = w.grad().clone();
    y.backward();
    REQUIRE(w.grad().allclose(once * 2));
    REQUIRE_THROWS_WITH(y.backward(), Catch::Contains("a second time"));
  }
}

TEST_CASE("what a run saved is freed when it is done with, while its outputs live on") {
  at::Tensor w = at::randn({4, 4}).requires_grad_();
  Tensors held;  // the first run's results, as Lua holds them until it collects them
  c10::weak_intrusive_ptr<c10::StorageImpl> hidden_storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), 0, at::DataPtr(), nullptr, false));
  auto body = [&](const Tensors& in) {
    at::Tensor hidden = at::exp(in[0]);  // saved by the product's backward, and nowhere else
    hidden_storage = hidden.storage().getWeakStorageImpl();
    held = {at::matmul(hidden, w)};
    return held;
  };
  at::Tensor y = accel::checkpoint({at::randn({2, 4})}, body, body)[0];
  REQUIRE(held[0].grad_fn() != nullptr);
  REQUIRE(hidden_storage.expired());
  // And what the recomputation saved once backward is done with it, also
  // when its nested pass keeps the graphs it runs (it reaches a tensor made
  // before the block).
  at::Tensor before = w.sum();
  auto reaching = [&](const Tensors& in) {
    Tensors out = body(in);
    held = {out[0] * before};
    return held;
  };
  accel::checkpoint({at::randn({2, 4})}, reaching, reaching)[0].sum().backward();
  REQUIRE(held[0].grad_fn() != nullptr);
  REQUIRE(hidden_storage.expired());
}

TEST_CASE("outputs that need no gradient come back as they are, without grad mode nothing is saved") {
  at::Tensor w = at::randn({4, 4}).requires_grad_();
  at::Tensor ids = at::arange(3);
  auto body = [&](const Tensors& in) { return Tensors{at::matmul(in[0], w), ids}; };
  Tensors out = accel::checkpoint({at::randn({2, 4})}, body, body);
  REQUIRE(out[0].grad_fn()->name() == "CheckpointBackward");
  REQUIRE(out[1].is_same(ids));
  at::NoGradGuard no_grad;
  REQUIRE(accel::checkpoint({at::randn({2, 4})}, body, body)[0].grad_fn() == nullptr);
}

TEST_CASE("on two ranks the reducer sees each gradient once and averages as without checkpoints") {
  auto codes = accel::testing::run_ranks(2, [](int rank, accel::Communicator& comm) {
    Net net(3);
    auto step = [&](bool checkpointed) {
      for (at::Tensor p : net.params()) p.mutable_grad().reset();
      accel::GradientReducer reducer(comm, net.params(), /*bucket_bytes=*/1024);
      at::manual_seed(100 + rank);
      at::Tensor x = at::randn({4, 8});
      forward(net, x, checkpointed).backward();  // unannounced: ends itself
      std::map<int64_t, int> ready;
      for (const auto& e : reducer.last_events()) {
        if (e.kind == accel::GradientReducer::Event::Kind::GradientReady) ++ready[e.index];
      }
      CHILD_CHECK(ready.size() == net.params().size());
      for (const auto& [index, n] : ready) CHILD_CHECK(n == 1);
      Tensors grads;
      for (const at::Tensor& p : net.params()) grads.push_back(p.grad().clone());
      return grads;
    };
    CHILD_CHECK(all_equal(step(false), step(true)));
  });
  for (int code : codes) REQUIRE(code == 0);
}
