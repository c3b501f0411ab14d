// W1 digits-mlp written directly against LibTorch: MLP 64-256-256-10 on the
// digits set, batch 64 per rank, AdamW lr 1e-3, seed 0. Twin of
// bench/workloads/digits_mlp.lua and bench/python/digits_mlp.py.
//   bench_launch --nproc 2 build-bench/bench/bench_digits_mlp [warmup window windows]
#include <torch/torch.h>

#include "bench/cpp/bench_common.h"
#include "engine/data/csv_reader.h"

int main(int argc, char** argv) {
  at::set_num_threads(1);
  bench::LoopConfig config = bench::parse_loop_config(argc, argv);
  bench::World world = bench::join_world();
  torch::manual_seed(0);

  const char* path = "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz";
  auto table = accel::data::CsvTable::read(path);
  std::vector<int64_t> columns(65);
  for (int64_t i = 0; i < 65; ++i) columns[i] = i;
  at::Tensor rows = table.columns(columns, at::kFloat);  // 1797 x 65: pixels 0..16, then the digit
  at::Tensor x = rows.narrow(1, 0, 64) / 16;
  at::Tensor y = rows.select(1, 64).to(at::kLong);

  torch::nn::Sequential model(torch::nn::Linear(64, 256), torch::nn::ReLU(), torch::nn::Linear(256, 256),
                              torch::nn::ReLU(), torch::nn::Linear(256, 10));
  bench::Trainer trainer(world, model->parameters());
  bench::train(world, config, x, y, 64, [&](const at::Tensor& xb, const at::Tensor& yb) {
    return trainer.finish(torch::nn::functional::cross_entropy(model->forward(xb), yb));
  });
}
