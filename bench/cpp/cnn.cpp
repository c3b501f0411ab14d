// W2 cnn written directly against LibTorch: conv 1->16 k3, ReLU, maxpool 2,
// conv 16->32 k3, ReLU, maxpool 2, linear to 10, on 2048 synthetic 1x28x28
// images (randn and randint after seeding 0), batch 32 per rank, AdamW lr
// 1e-3. Twin of bench/workloads/cnn.lua and bench/python/cnn.py.
//   bench_launch --nproc 2 build-bench/bench/bench_cnn [warmup window windows]
#include <torch/torch.h>

#include "bench/cpp/bench_common.h"

namespace F = torch::nn::functional;

struct NetImpl : torch::nn::Module {
  torch::nn::Conv2d conv1{torch::nn::Conv2dOptions(1, 16, 3)};
  torch::nn::Conv2d conv2{torch::nn::Conv2dOptions(16, 32, 3)};
  torch::nn::Linear fc{32 * 5 * 5, 10};

  NetImpl() {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("fc", fc);
  }

  torch::Tensor forward(torch::Tensor x) {
    x = F::max_pool2d(torch::relu(conv1->forward(x)), F::MaxPool2dFuncOptions(2));
    x = F::max_pool2d(torch::relu(conv2->forward(x)), F::MaxPool2dFuncOptions(2));
    return fc->forward(x.flatten(1));
  }
};
TORCH_MODULE(Net);

int main(int argc, char** argv) {
  at::set_num_threads(1);
  bench::LoopConfig config = bench::parse_loop_config(argc, argv);
  bench::World world = bench::join_world();
  torch::manual_seed(0);

  at::Tensor x = torch::randn({2048, 1, 28, 28});
  at::Tensor y = torch::randint(0, 10, {2048});
  Net model;
  bench::Trainer trainer(world, model->parameters());
  bench::train(world, config, x, y, 32, [&](const at::Tensor& xb, const at::Tensor& yb) {
    return trainer.finish(F::cross_entropy(model->forward(xb), yb));
  });
}
