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
//
// Vocabulary-parallel (a tensor-parallel lm_head, Megatron's
// vocab_parallel_cross_entropy, chunked): rank r of the group holds the
// rows [r V/tp, (r + 1) V/tp) of the weight and the same hidden
// states and targets. Per chunk every rank computes its slice's logits, its
// log-sum-exp and the target's logit where the target is its own; one
// all-gather of those two numbers per token gives every rank the row's
// log-sum-exp over the whole vocabulary (the log-sum-exp of the ranks'
// ones, stable without a separate max) and the target's logit, hence the
// same loss. The gradients of the weight's (and bias') slice are then this
// rank's own; the hidden states' gradient is this rank's part of the sum
// over the group (as F.linear's in a column-parallel layer): the caller
// takes the hidden states through the group's copy_to (or the sequence
// gather) as that layer does, and so gets the sum.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <memory>

namespace accel {
class Communicator;
}

namespace accel::nn {

struct LinearCrossEntropyOptions {
  int64_t ignore_index = -100;  // targets equal to it count for nothing
  // Tokens per chunk; 0: Liger's choice, the power of two nearest above
  // tokens / ceil(vocabulary / hidden size), so a chunk's logits are about
  // as large as the hidden states, but at least 256 tokens (or all of them),
  // since each chunk reads the whole output weight.
  int64_t chunk_size = 0;
  // The sum of the tokens' losses is divided by this (transformers'
  // num_items_in_batch); absent: the number of targets not ignored. With
  // sum = true nothing divides.
  c10::optional<double> num_items;
  bool sum = false;
};

// The output layer's optional parts: a bias (vocab) and a LoRA adapter
// (lora_a (r, hidden), lora_b (vocab, r), times scaling). Split over a
// tensor-parallel group, weight and bias are this rank's equal slice of the
// vocabulary (rank r's starts at token r V/tp); no adapter then (LoRA
// targets nn.Linear layers, never a tensor-parallel one).
struct OutputLayer {
  at::Tensor weight;  // (vocab, hidden)
  at::Tensor bias;
  at::Tensor lora_a;
  at::Tensor lora_b;
  double scaling = 1.0;
  std::shared_ptr<Communicator> vocab_group;  // null: the whole vocabulary is here
};

// hidden (tokens, hidden), targets (tokens) int64 0-based token ids -> the
// float32 loss: the mean (or sum) of -log softmax(hidden W^T + b)[target]
// (over the whole vocabulary: a vocab_group's, for token ids up to V - 1).
// Differentiable in hidden, the weight, the bias and the adapter's A and B,
// each only when it requires grad.
at::Tensor linear_cross_entropy(const at::Tensor& hidden, const OutputLayer& layer, const at::Tensor& targets,
                                const LinearCrossEntropyOptions& options);

// The chunk size used for `tokens` tokens, a `vocab` vocabulary and `hidden` features.
int64_t linear_cross_entropy_chunk(int64_t tokens, int64_t vocab, int64_t hidden, int64_t requested);

}  // namespace accel::nn
