// W3 char-lm written directly against LibTorch: embedding 96 -> 128, two
// causal Transformer encoder layers (4 heads, feed-forward 512, PyTorch's
// defaults otherwise), a linear head to 96; windows of 64 characters of
// GPL-3 (byte b -> b - 32 for printable ASCII, 95 otherwise), batch 16 per
// rank, AdamW lr 1e-3. Twin of bench/workloads/char_lm.lua and
// bench/python/char_lm.py.
//   bench_launch --nproc 2 build-bench/bench/bench_char_lm [warmup window windows]
#include <torch/torch.h>

#include <limits>

#include "bench/cpp/bench_common.h"
#include "engine/data/file_text.h"

namespace F = torch::nn::functional;

constexpr int64_t kVocab = 96, kDim = 128, kSeq = 64;

struct CharLmImpl : torch::nn::Module {
  torch::nn::Embedding embed{kVocab, kDim};
  torch::nn::TransformerEncoderLayer layer1{torch::nn::TransformerEncoderLayerOptions(kDim, 4).dim_feedforward(512)};
  torch::nn::TransformerEncoderLayer layer2{torch::nn::TransformerEncoderLayerOptions(kDim, 4).dim_feedforward(512)};
  torch::nn::Linear head{kDim, kVocab};
  torch::Tensor causal = torch::triu(torch::full({kSeq, kSeq}, -std::numeric_limits<float>::infinity()), 1);

  CharLmImpl() {
    register_module("embed", embed);
    register_module("layer1", layer1);
    register_module("layer2", layer2);
    register_module("head", head);
  }

  torch::Tensor forward(const torch::Tensor& ids) {
    // LibTorch's encoder layer is sequence-first: (N, S, E) -> (S, N, E) and back.
    torch::Tensor h = embed->forward(ids).transpose(0, 1);
    h = layer2->forward(layer1->forward(h, causal), causal);
    return head->forward(h.transpose(0, 1));
  }
};
TORCH_MODULE(CharLm);

int main(int argc, char** argv) {
  at::set_num_threads(1);
  bench::LoopConfig config = bench::parse_loop_config(argc, argv);
  bench::World world = bench::join_world();
  torch::manual_seed(0);

  std::string text = accel::data::read_file_text("/usr/share/common-licenses/GPL-3");
  std::vector<int64_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    int b = static_cast<unsigned char>(text[i]);
    ids[i] = b >= 32 && b <= 126 ? b - 32 : 95;
  }
  at::Tensor all = torch::tensor(ids);
  const int64_t windows = (all.numel() - 1 - kSeq) / kSeq + 1;
  at::Tensor x = all.narrow(0, 0, windows * kSeq).view({windows, kSeq});
  at::Tensor y = all.narrow(0, 1, windows * kSeq).view({windows, kSeq});

  CharLm model;
  bench::Trainer trainer(world, model->parameters());
  bench::train(world, config, x, y, 16, [&](const at::Tensor& xb, const at::Tensor& yb) {
    return trainer.finish(F::cross_entropy(model->forward(xb).reshape({-1, kVocab}), yb.reshape(-1)));
  });
}
