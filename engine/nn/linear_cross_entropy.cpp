#include "engine/nn/linear_cross_entropy.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "engine/comm/communicator.h"
#include "engine/compat.h"
#include "engine/nn/linear.h"

namespace accel::nn {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool wants_grad(const Tensor& t) { return t.defined() && t.requires_grad(); }

// The chunks' running gradients, float32 sums for the parameters.
struct Gradients {
  Tensor hidden, weight, bias, lora_a, lora_b;
};

// The dtype products run in: autocast's when it is on for the device, else the hidden states'.
at::ScalarType compute_dtype(const Tensor& hidden) {
  const auto device = hidden.device().type();
  if (compat::autocast_enabled(device)) return compat::autocast_dtype(device);
  return hidden.scalar_type();
}

// The whole vocabulary's log-sum-exp and target logit of each row from
// every rank's over its slice (the target's is 0 on the ranks without it):
// one all-gather of both.
std::pair<Tensor, Tensor> across_vocab_group(const Tensor& lse, const Tensor& picked, Communicator& group) {
  const Tensor ranks = at::stack(group.all_gather(at::stack({lse, picked}).contiguous()));  // (tp, 2, n)
  return {ranks.select(1, 0).logsumexp(0), ranks.select(1, 1).sum(0)};
}

struct LinearCrossEntropyFunction : public torch::autograd::Function<LinearCrossEntropyFunction> {
  // The absent parts come as nullopt: LibTorch 1.13's custom functions take
  // no undefined tensor.
  static Tensor forward(AutogradContext* ctx, const Tensor& hidden, const Tensor& weight,
                        const c10::optional<Tensor>& bias_part, const c10::optional<Tensor>& lora_a_part,
                        const c10::optional<Tensor>& lora_b_part, const Tensor& targets, double scaling,
                        const std::shared_ptr<Communicator>& group, const LinearCrossEntropyOptions& o) {
    const Tensor bias = bias_part.value_or(Tensor()), lora_a = lora_a_part.value_or(Tensor()),
                 lora_b = lora_b_part.value_or(Tensor());
    // Products in the compute dtype; no autocast inside (the casts are made here).
    const at::ScalarType dtype = compute_dtype(hidden);
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t tokens = hidden.size(0), vocab = weight.size(0);
    const int64_t first = group ? group->rank() * vocab : 0;  // this slice's first token id
    const Tensor w = weight.to(dtype);
    const Tensor b = bias.defined() ? bias.to(dtype) : Tensor();
    const bool adapted = lora_a.defined();
    const Tensor a = adapted ? lora_a.to(dtype) : Tensor();
    const Tensor bl = adapted ? lora_b.to(dtype) : Tensor();
    const Tensor counted = targets.ne(o.ignore_index);
    const double divisor = o.sum ? 1.0 : o.num_items ? *o.num_items : static_cast<double>(counted.sum().item<int64_t>());
    const bool grads = wants_grad(hidden) || wants_grad(weight) || wants_grad(bias) || wants_grad(lora_a) ||
                       wants_grad(lora_b);
    Gradients g;
    if (wants_grad(hidden)) g.hidden = at::empty_like(hidden);
    auto zeros_of = [](const Tensor& t) { return at::zeros(t.sizes(), t.options().dtype(at::kFloat)); };
    if (wants_grad(weight)) g.weight = zeros_of(weight);
    if (wants_grad(bias)) g.bias = zeros_of(bias);
    if (wants_grad(lora_a)) g.lora_a = zeros_of(lora_a);
    if (wants_grad(lora_b)) g.lora_b = zeros_of(lora_b);
    Tensor total = at::zeros({}, hidden.options().dtype(at::kFloat));
    const int64_t chunk = linear_cross_entropy_chunk(tokens, vocab, hidden.size(1), o.chunk_size);
    for (int64_t start = 0; start < tokens; start += chunk) {
      const int64_t n = std::min(chunk, tokens - start);
      const Tensor h = hidden.narrow(0, start, n).to(dtype);
      const Tensor keep = counted.narrow(0, start, n);
      const Tensor t = at::where(keep, targets.narrow(0, start, n), at::zeros({}, targets.options()));
      // The rows whose target is in this slice, and its column there.
      const Tensor here = group ? keep.logical_and(t.ge(first)).logical_and_(t.lt(first + vocab)) : keep;
      const Tensor column = group ? at::where(here, t - first, at::zeros({}, t.options())) : t;
      const Tensor z = adapted ? accel::nn::linear(h, a, c10::nullopt) : Tensor();
      Tensor logits = accel::nn::linear(h, w, b.defined() ? c10::optional<Tensor>(b) : c10::nullopt);
      if (adapted) logits = logits + accel::nn::linear(z, bl, c10::nullopt) * scaling;
      logits = logits.to(at::kFloat);
      Tensor lse = logits.logsumexp(1);
      Tensor picked = logits.gather(1, column.unsqueeze(1)).squeeze(1);
      if (group) std::tie(lse, picked) = across_vocab_group(lse, picked * here, *group);
      total += ((lse - picked) * keep).sum();
      if (!grads) continue;
      // d loss / d logits = (softmax - one_hot(target)) / divisor on counted rows.
      Tensor d = logits.sub_(lse.unsqueeze(1)).exp_();
      d.scatter_add_(1, column.unsqueeze(1), here.to(at::kFloat).neg_().unsqueeze(1));
      d.mul_((keep.to(at::kFloat) / divisor).unsqueeze(1));
      const Tensor dc = d.to(dtype);
      const Tensor db = adapted ? accel::nn::linear(dc, bl.t(), c10::nullopt) : Tensor();  // d @ B: (n, r)
      if (g.hidden.defined()) {
        Tensor dh = accel::nn::linear(dc, w.t(), c10::nullopt);
        if (adapted) dh = dh + accel::nn::linear(db, a.t(), c10::nullopt) * scaling;
        g.hidden.narrow(0, start, n).copy_(dh);
      }
      if (g.weight.defined()) g.weight.add_(accel::nn::linear(dc.t(), h.t(), c10::nullopt));
      if (g.bias.defined()) g.bias.add_(d.sum(0));
      if (g.lora_b.defined()) g.lora_b.add_(accel::nn::linear(dc.t(), z.t(), c10::nullopt), scaling);
      if (g.lora_a.defined()) g.lora_a.add_(accel::nn::linear(db.t(), h.t(), c10::nullopt), scaling);
    }
    auto keep_grad = [&](const char* name, const Tensor& grad, const Tensor& like) {
      if (grad.defined()) ctx->saved_data[name] = grad.to(like.scalar_type());
    };
    keep_grad("hidden", g.hidden, hidden);
    keep_grad("weight", g.weight, weight);
    keep_grad("bias", g.bias, bias);
    keep_grad("lora_a", g.lora_a, lora_a);
    keep_grad("lora_b", g.lora_b, lora_b);
    return total / divisor;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const Tensor& scale = grads[0];
    auto scaled = [&](const char* name) {
      auto it = ctx->saved_data.find(name);
      if (it == ctx->saved_data.end()) return Tensor();
      Tensor g = it->second.toTensor();
      return g * scale.to(g.scalar_type());
    };
    return {scaled("hidden"), scaled("weight"), scaled("bias"), scaled("lora_a"), scaled("lora_b"),
            Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

// Liger's rule alone gives a few tokens per chunk at a small batch and a
// large vocabulary (8 of 256 tokens at 128,256 x 2048), and every chunk
// reads the whole output weight again: the loss of a 1B Llama's step took
// 16-36 s at 8 tokens a chunk against 1.3-9 s at 256 on this project's CPU
// (bench/finetune/RESULTS-1b.md). So a chunk holds at least kMinChunk
// tokens (or all of them): 128 MiB of float32 logits at that vocabulary.
constexpr int64_t kMinChunk = 256;

int64_t linear_cross_entropy_chunk(int64_t tokens, int64_t vocab, int64_t hidden, int64_t requested) {
  if (requested > 0) return requested;
  const int64_t chunks = std::max<int64_t>(1, (vocab + hidden - 1) / hidden);
  const int64_t per_chunk = std::max<int64_t>(1, (tokens + chunks - 1) / chunks);
  int64_t size = 1;
  while (size < per_chunk) size *= 2;
  return std::max<int64_t>(1, std::min(std::max(size, kMinChunk), tokens));
}

at::Tensor linear_cross_entropy(const at::Tensor& hidden, const OutputLayer& layer, const at::Tensor& targets,
                                const LinearCrossEntropyOptions& options) {
  TORCH_CHECK(hidden.dim() == 2, "linear_cross_entropy: hidden states must be (tokens, hidden), got ", hidden.sizes());
  TORCH_CHECK(layer.weight.dim() == 2 && layer.weight.size(1) == hidden.size(1), "linear_cross_entropy: weight ",
              layer.weight.sizes(), " does not fit hidden states ", hidden.sizes());
  TORCH_CHECK(targets.dim() == 1 && targets.size(0) == hidden.size(0), "linear_cross_entropy: ", hidden.size(0),
              " tokens but targets of shape ", targets.sizes());
  TORCH_CHECK(targets.scalar_type() == at::kLong, "linear_cross_entropy: targets must be int64, got ",
              targets.scalar_type());
  TORCH_CHECK(!layer.bias.defined() || (layer.bias.dim() == 1 && layer.bias.size(0) == layer.weight.size(0)),
              "linear_cross_entropy: bias ", layer.bias.sizes(), " does not fit weight ", layer.weight.sizes());
  if (layer.lora_a.defined()) {
    TORCH_CHECK(layer.lora_b.defined() && layer.lora_a.dim() == 2 && layer.lora_b.dim() == 2 &&
                    layer.lora_a.size(1) == hidden.size(1) && layer.lora_b.size(0) == layer.weight.size(0) &&
                    layer.lora_b.size(1) == layer.lora_a.size(0),
                "linear_cross_entropy: LoRA A ", layer.lora_a.sizes(), " and B ",
                layer.lora_b.defined() ? layer.lora_b.sizes() : at::IntArrayRef{}, " do not fit weight ",
                layer.weight.sizes());
  }
  TORCH_CHECK(!layer.vocab_group || !layer.lora_a.defined(), "linear_cross_entropy: a vocabulary split over a "
              "tensor-parallel group takes no LoRA adapter");
  TORCH_CHECK(!options.num_items || *options.num_items > 0, "linear_cross_entropy: num_items_in_batch must be "
              "positive, got ", options.num_items.value_or(0));
  const int64_t vocab = layer.weight.size(0) * (layer.vocab_group ? layer.vocab_group->size() : 1);
  const Tensor counted = targets.ne(options.ignore_index);
  if (counted.any().item<bool>()) {
    const Tensor ids = targets.masked_select(counted);
    const int64_t smallest = ids.min().item<int64_t>(), largest = ids.max().item<int64_t>();
    TORCH_CHECK(smallest >= 0 && largest < vocab, "linear_cross_entropy: target ",
                smallest < 0 ? smallest : largest, " is outside the vocabulary (0 to ", vocab - 1, ")");
  }
  auto part = [](const Tensor& t) { return t.defined() ? c10::optional<Tensor>(t) : c10::nullopt; };
  return LinearCrossEntropyFunction::apply(hidden, layer.weight, part(layer.bias), part(layer.lora_a),
                                           part(layer.lora_b), targets, layer.scaling, layer.vocab_group, options);
}

}  // namespace accel::nn
