// A language model's loss from its last hidden states and its output layer
// without ever holding the logits of all tokens, as Liger's fused linear
// cross-entropy: the tokens are taken a chunk at a time; for each chunk the
// logits are computed, turned into the chunk's loss and at once into their
// gradient (softmax minus the target's one-hot), which is multiplied back
// into the chunk's gradient of the hidden states and added into the output
// layer's weight gradient, and then dropped. Forward therefore leaves the
// finished gradients for backward, which only scales them by the incoming
// gradient; no chunk's logits outlive it. Under autocast the products run
// in the autocast dtype and the softmax in float32, as the unfused path
// (a bfloat16 lm_head, then cross_entropy of the logits in float32) does.
// An adapter on the output layer (LoRA: logits += scaling (h A^T) B^T) is
// part of the same chunks, with gradients for A and B.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>

namespace accel::nn {

struct LinearCrossEntropyOptions {
  int64_t ignore_index = -100;  // targets equal to it count for nothing
  // Tokens per chunk; 0: Liger's choice, the power of two nearest above
  // tokens / ceil(vocabulary / hidden size), so a chunk's logits are about
  // as large as the hidden states.
  int64_t chunk_size = 0;
  // The sum of the tokens' losses is divided by this (transformers'
  // num_items_in_batch); absent: the number of targets not ignored. With
  // sum = true nothing divides.
  c10::optional<double> num_items;
  bool sum = false;
};

// The output layer's optional parts: a bias (vocab) and a LoRA adapter
// (lora_a (r, hidden), lora_b (vocab, r), times scaling).
struct OutputLayer {
  at::Tensor weight;  // (vocab, hidden)
  at::Tensor bias;
  at::Tensor lora_a;
  at::Tensor lora_b;
  double scaling = 1.0;
};

// hidden (tokens, hidden), targets (tokens) int64 0-based token ids -> the
// float32 loss: the mean (or sum) of -log softmax(hidden W^T + b)[target].
// Differentiable in hidden, the weight, the bias and the adapter's A and B,
// each only when it requires grad.
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const OutputLayer& layer, const at::Tensor& targets,
                                const LinearCrossEntropyOptions& options);

// The chunk size used for `tokens` tokens, a `vocab` vocabulary and `hidden` features.
int64_t linear_cross_entropy_chunk(int64_t tokens, int64_t vocab, int64_t hidden, int64_t requested);

}  // namespace accel::nn
