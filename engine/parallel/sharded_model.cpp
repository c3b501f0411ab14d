#include "engine/parallel/sharded_model.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "engine/activation_checkpoint.h"
#include "engine/caching_cpu_allocator.h"
#include "engine/comm/communicator.h"
#include "engine/grad_clipping.h"
#include "engine/parallel/gradient_reducer.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/flat_parameter.h"

namespace accel {

// A post hook on a parameter's gradient accumulator, removed with the model.
struct ShardedModel::Hook {
  std::shared_ptr<torch::autograd::Node> accumulator;
  uintptr_t key;
  size_t flat;
  size_t param;
};

namespace {

using ImplMap = std::unordered_map<const c10::TensorImpl*, size_t>;

// Parameter -> its optimizer group; parameters the optimizer does not hold map
// to one group past the last.
ImplMap groups_of(const optim::Optimizer& optimizer) {
  ImplMap out;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    for (const at::Tensor& p : groups[g].params) out[p.unsafeGetTensorImpl()] = g;
  }
  return out;
}

}  // namespace

ShardedModel::ShardedModel(Communicator& comm, int stage, const std::vector<std::vector<at::Tensor>>& units,
                           const optim::Optimizer& optimizer, int64_t bucket_bytes, at::Device device,
                           MeshGroups mesh, MixedPrecisionPolicy precision)
    : comm_(comm), mesh_(std::move(mesh)), stage_(stage) {
  TORCH_CHECK(stage >= 1 && stage <= 3, "zero_stage must be 1, 2 or 3, got ", stage);
  TORCH_CHECK(bucket_bytes > 0, "bucket size must be positive, got ", bucket_bytes);
  // Stage 1's reducer would average over the shard group alone.
  TORCH_CHECK(stage >= 2 || !mesh_.replicate, "sharding with replicas (HSDP) needs stage 2 or 3, got ", stage);
  // Stage 1's gradients are all-reduced whole by its reducer, in their own dtype.
  TORCH_CHECK(stage >= 2 || !precision.reduce_dtype, "sharding: a reduce_dtype needs stage 2 or 3, got ", stage);
  const ImplMap group_of = groups_of(optimizer);
  std::unordered_set<const c10::TensorImpl*> split;
  for (const at::Tensor& p : mesh_.tp_split) split.insert(p.unsafeGetTensorImpl());
  mesh_.tp_split.clear();
  const size_t unheld = optimizer.param_groups().size();
  for (const std::vector<at::Tensor>& unit_params : units) {
    Unit unit;
    // Open flat parameters by (group, dtype); stages 1 and 2 take the last
    // parameters first and close a flat parameter at bucket_bytes, so that
    // reductions start while backward goes on.
    struct Open {
      std::vector<at::Tensor> params;
      std::vector<Origin> origins;
      int64_t bytes = 0;
    };
    std::map<std::tuple<size_t, int, bool>, Open> open;
    auto close = [&](Open& flat, bool split_over_tp) {
      if (flat.params.empty()) return;
      const size_t k = flats_.size();
      flat_split_.push_back(split_over_tp);
      unit.flats.push_back(k);
      flats_.push_back(std::make_unique<FlatParameter>(comm_, flat.params, stage_ == 3, device, precision));
      origins_.push_back(std::move(flat.origins));
      for (size_t i = 0; i < flat.params.size(); ++i) {
        const at::Tensor& now = flats_[k]->params()[i];
        if (!now.is_same(flat.params[i])) replaced_[flat.params[i].unsafeGetTensorImpl()] = {flat.params[i], now};
      }
      // Stage 3 releases each flat parameter as soon as it is made, so that a
      // rank given meta parameters holds one full buffer at a time; its
      // gradient accumulators are made first, while the parameters have
      // their shapes (an accumulator records its parameter's when made).
      if (stage_ >= 2) hook_gradients(k);
      if (stage_ == 3) flats_[k]->release();
      // The parameters' former storage (they are views of the flat buffer
      // now) goes back to the system at once: kept in the allocator's pools
      // (by size, none of them a flat buffer's) until the whole model was
      // sharded, it made a rank holding real weights peak at its full
      // weights plus all its shards (engine/caching_cpu_allocator.h).
      release_pooled_blocks();
      flat = Open{};
    };
    const size_t n = unit_params.size();
    for (size_t j = 0; j < n; ++j) {
      const size_t position = stage_ == 3 ? j : n - 1 - j;
      const at::Tensor& p = unit_params[position];
      TORCH_CHECK(p.is_leaf() && p.requires_grad(), "sharding: parameter ", j + 1,
                  " is not a leaf tensor that requires grad");
      auto found = group_of.find(p.unsafeGetTensorImpl());
      const bool split_over_tp = split.count(p.unsafeGetTensorImpl()) > 0;
      Open& flat = open[{found == group_of.end() ? unheld : found->second, static_cast<int>(p.scalar_type()),
                         split_over_tp}];
      const int64_t p_bytes = p.numel() * static_cast<int64_t>(p.element_size());
      if (stage_ < 3 && !flat.params.empty() && flat.bytes + p_bytes > bucket_bytes) close(flat, split_over_tp);
      flat.params.push_back(p);
      flat.origins.push_back(Origin{units_.size(), position});
      flat.bytes += p_bytes;
    }
    for (auto& [key, flat] : open) close(flat, std::get<2>(key));
    units_.push_back(std::move(unit));
  }
  position_.assign(units_.size(), -1);
  if (stage_ == 1) {
    // One bucket a flat parameter, laid out as it is (flat parameters are
    // cut as buckets would be, last parameters first), so that each rank's
    // gradient slice is a view of the all-reduced bucket.
    std::vector<GradientReducer::BucketLayout> buckets;
    for (const auto& flat : flats_) {
      params_.insert(params_.end(), flat->params().begin(), flat->params().end());
      buckets.push_back({flat->params(), flat->world_size() * flat->shard_numel()});
    }
    reducer_ = std::make_unique<GradientReducer>(comm_, std::move(buckets));
  }
}

void ShardedModel::hook_gradients(size_t k) {
  const std::vector<at::Tensor>& params = flats_[k]->params();
  for (size_t i = 0; i < params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, k, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient(k, i);
          return outputs;
        }));
    // Holding the accumulator keeps it (and the hook) alive: a parameter
    // references its accumulator only weakly.
    hooks_.push_back(std::make_unique<Hook>(Hook{std::move(accumulator), key, k, i}));
  }
}

ShardedModel::~ShardedModel() {
  for (auto& hook : hooks_) hook->accumulator->del_post_hook(hook->key);
}

void ShardedModel::shard_optimizer(optim::Optimizer& optimizer) {
  ImplMap flat_of;
  for (size_t k = 0; k < flats_.size(); ++k) {
    for (const at::Tensor& p : flats_[k]->params()) flat_of[p.unsafeGetTensorImpl()] = k;
  }
  std::vector<int64_t> group_of_flat(flats_.size(), -1);
  const auto& groups = optimizer.param_groups();
  // The optimizer's layout before sharding, with the model's parameters as
  // they are now (a meta one given becomes its replacement).
  original_groups_.clear();
  for (const auto& group : groups) {
    std::vector<at::Tensor>& params = original_groups_.emplace_back();
    for (const at::Tensor& p : group.params) {
      auto found = replaced_.find(p.unsafeGetTensorImpl());
      params.push_back(found == replaced_.end() ? p : found->second.second);
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<at::Tensor> params;
    for (const at::Tensor& p : original_groups_[g]) {
      auto found = flat_of.find(p.unsafeGetTensorImpl());
      if (found == flat_of.end()) {
        params.push_back(p);
        continue;
      }
      int64_t& owner = group_of_flat[found->second];
      TORCH_CHECK(owner == -1 || owner == static_cast<int64_t>(g), optimizer.name(), ": param group ", g + 1,
                  " holds parameters sharded together with group ", owner + 1,
                  "'s; prepare the model and its optimizer in one call to prepare()");
      if (owner == -1) params.push_back(flats_[found->second]->shard());
      owner = static_cast<int64_t>(g);
    }
    optimizer.replace_params(g, std::move(params));
  }
  replaced_.clear();
}

void ShardedModel::offload_to_host(const CpuOffload& offload) {
  TORCH_CHECK(original_groups_.empty(), "sharding: offload_to_host comes before shard_optimizer");
  for (auto& flat : flats_) flat->offload_to_host(offload);
}

std::vector<std::vector<at::Tensor>> ShardedModel::unit_parameters() const {
  std::vector<std::vector<at::Tensor>> out(units_.size());
  for (size_t k = 0; k < flats_.size(); ++k) {
    for (size_t i = 0; i < origins_[k].size(); ++i) {
      std::vector<at::Tensor>& unit = out[origins_[k][i].unit];
      if (unit.size() <= origins_[k][i].position) unit.resize(origins_[k][i].position + 1);
      unit[origins_[k][i].position] = flats_[k]->params()[i];
    }
  }
  return out;
}

// Stage 3: gathering and releasing units -----------------------------------

void ShardedModel::gather_unit(size_t unit) {
  for (size_t k : units_[unit].flats) flats_[k]->gather();
}

void ShardedModel::prefetch_unit(size_t unit) {
  for (size_t k : units_[unit].flats) flats_[k]->prefetch();
}

void ShardedModel::release_unit(size_t unit) {
  for (size_t k : units_[unit].flats) flats_[k]->release();
}

void ShardedModel::before_forward(size_t unit) {
  TORCH_CHECK(unit < units_.size(), "sharding: unit ", unit, " does not exist");
  if (stage_ < 3) return;
  if (position_[unit] < 0) {
    position_[unit] = static_cast<int64_t>(forward_order_.size());
    forward_order_.push_back(unit);
  }
  gather_unit(unit);
  // A checkpointed block recomputed in backward (engine/activation_checkpoint.h)
  // runs its units' forwards again: the next unit is one backward has passed.
  if (recomputing_activations()) return;
  const size_t next = static_cast<size_t>(position_[unit]) + 1;
  if (next < forward_order_.size()) prefetch_unit(forward_order_[next]);
}

void ShardedModel::after_forward(size_t unit, const std::vector<at::Tensor>& outputs, bool keep) {
  TORCH_CHECK(unit < units_.size(), "sharding: unit ", unit, " does not exist");
  if (stage_ < 3) return;
  for (const at::Tensor& out : outputs) {
    if (!out.defined() || !out.requires_grad()) continue;
    out.register_hook([this, unit](const at::Tensor& grad) {
      before_backward(unit);
      return grad;
    });
  }
  // Recomputed in backward, the unit is about to compute its gradients: it
  // stays gathered until they are reduced (on_gradient releases it).
  if (!keep && !recomputing_activations()) release_unit(unit);
}

void ShardedModel::before_backward(size_t unit) {
  gather_unit(unit);
  // Backward runs the units in reverse: the one before this is next.
  const int64_t previous = position_[unit] - 1;
  if (previous >= 0) prefetch_unit(forward_order_[static_cast<size_t>(previous)]);
}

void ShardedModel::gather_all() {
  if (stage_ < 3) return;
  for (auto& flat : flats_) flat->gather_full_precision();
}

void ShardedModel::keep_written_parameters() {
  if (stage_ < 3) return;
  for (auto& flat : flats_) flat->keep_written_slice();
}

void ShardedModel::release_all() {
  if (stage_ < 3) return;
  for (auto& flat : flats_) flat->release();
  // gather_all under a param_dtype pointed the parameters at buffers of
  // another dtype, and LibTorch's set_data then forgets a parameter's
  // gradient accumulator: each parameter takes back its own (whose post
  // hook reduces its gradients; made for the param_dtype it has again).
  for (auto& hook : hooks_) {
    torch::autograd::impl::get_autograd_meta(flats_[hook->flat]->params()[hook->param])->grad_accumulator_ =
        hook->accumulator;
  }
}

// Gradients -------------------------------------------------------------------

void ShardedModel::on_gradient(size_t flat, size_t param) {
  if (!pass_pending_) {
    pass_pending_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { end_of_pass(); });
  }
  if (flats_[flat]->add_gradient(param) && stage_ == 3) flats_[flat]->release();
}

// Stages 2 and 3 (stage 1's reducer ends its own passes): a backward nobody
// announced ends here, as DDP's and FSDP's do (gradient_sync.h).
void ShardedModel::end_of_pass() {
  pass_pending_ = false;
  if (caller_finishes_) return;
  end_backward();
  if (sync_) finalize(0);
}

void ShardedModel::set_sync(bool sync) {
  sync_ = sync;
  if (reducer_) reducer_->set_sync(sync);
}

bool ShardedModel::sync() const { return sync_; }

void ShardedModel::caller_finishes_backward() {
  caller_finishes_ = true;
  if (reducer_) reducer_->caller_finishes_backward();
}

void ShardedModel::end_backward() {
  caller_finishes_ = false;
  if (reducer_) return reducer_->end_backward();
  // In flat parameter order, the same on every rank.
  for (auto& flat : flats_) flat->flush_gradients();
  release_all();
}

void ShardedModel::finalize(int64_t num_items) {
  if (reducer_) return reducer_->finalize(num_items);
  at::NoGradGuard no_grad;
  // The data-parallel ranks: the shard group, times its replicas (HSDP).
  std::vector<Communicator*> groups{&comm_};
  if (mesh_.replicate && mesh_.replicate->size() > 1) groups.push_back(mesh_.replicate);
  double items = static_cast<double>(num_items);
  double ranks = 1;
  for (Communicator* group : groups) {
    ranks *= group->size();
    if (group->size() == 1) continue;
    at::Tensor count = at::full({1}, items, at::TensorOptions().dtype(at::kDouble));
    group->all_reduce(count, ReduceOp::Sum);
    items = count.item<double>();
  }
  if (groups.size() > 1) {
    // Each replica's slices hold its own ranks' sum (the reduce-scatters):
    // summed over the replicas, every rank's slice is the sum over all.
    std::vector<std::unique_ptr<PendingOp>> pending;
    for (auto& flat : flats_) {
      at::Tensor& grad = flat->shard().mutable_grad();
      if (grad.defined()) pending.push_back(mesh_.replicate->all_reduce_async(grad, ReduceOp::Sum));
    }
    for (auto& op : pending) op->wait();
  }
  const double divisor = items > 0 ? items : ranks;
  if (divisor == 1) return;
  for (auto& flat : flats_) {
    at::Tensor& grad = flat->shard().mutable_grad();
    if (grad.defined()) grad.div_(divisor);
  }
}

std::vector<at::Tensor> ShardedModel::shards() const {
  std::vector<at::Tensor> out;
  for (const auto& flat : flats_) out.push_back(flat->shard());
  return out;
}

at::Tensor ShardedModel::grad_norm(double norm_type) const {
  at::NoGradGuard no_grad;
  const std::vector<at::Tensor> params = shards();
  // The norm of all the elements as one vector (grad_clipping.h). Each
  // rank's part: its largest |g| (inf), its smallest (-inf), its count of
  // non-zeros (0), or its sum of |g|^p; parts combine by max, min or sum.
  const bool largest = std::isinf(norm_type) && norm_type > 0;
  const bool smallest = std::isinf(norm_type) && norm_type < 0;
  const bool power = !std::isinf(norm_type) && norm_type != 0;
  const ReduceOp op = largest ? ReduceOp::Max : smallest ? ReduceOp::Min : ReduceOp::Sum;
  auto combine = [&](const at::Tensor& a, const at::Tensor& b) {
    return largest ? at::maximum(a, b) : smallest ? at::minimum(a, b) : a + b;
  };
  // Two parts on the model's device (the collective reads them there; an
  // offloaded gradient's part is copied to it): the parameters whole on every tp rank, and
  // those split over tp (MeshGroups), whose parts differ between tp ranks.
  at::Tensor local = at::full({2}, smallest ? std::numeric_limits<double>::infinity() : 0.0,
                              at::TensorOptions().dtype(at::kDouble).device(flats_.front()->device()));
  for (size_t k = 0; k < flats_.size(); ++k) {
    const at::Tensor& grad = params[k].grad();
    const int64_t content = flats_[k]->shard_content_numel();
    if (!grad.defined() || content == 0) continue;  // padding is no gradient's
    at::Tensor part = grad.narrow(0, 0, content).norm(norm_type).to(local.device(), at::kDouble).reshape({1});
    at::Tensor slot = local.narrow(0, flat_split_[k] ? 1 : 0, 1);
    slot.copy_(combine(slot, power ? part.pow(norm_type) : part));
  }
  if (comm_.size() > 1) comm_.all_reduce(local, op);
  // Replicas (HSDP) hold equal slices after finalize: counted once.
  at::Tensor split = local.narrow(0, 1, 1).clone();
  if (mesh_.tp && mesh_.tp->size() > 1) mesh_.tp->all_reduce(split, op);
  local = combine(local.narrow(0, 0, 1), split);
  return (power ? local.pow(1.0 / norm_type) : local).reshape({}).to(params.front().scalar_type());
}

at::Tensor ShardedModel::clip_grad_norm(double max_norm, double norm_type) {
  at::Tensor total = grad_norm(norm_type);
  const std::vector<at::Tensor> params = shards();
  // Offloaded gradients are scaled where they are, on the host.
  scale_to_max_norm(params, total.to(params.front().device()), max_norm);
  return total;
}

void ShardedModel::clip_grad_value(double clip_value) {
  accel::clip_grad_value(shards(), clip_value);
}

// The step ----------------------------------------------------------------------

void ShardedModel::before_step() {
  if (stage_ != 1) return;
  for (size_t k = 0; k < flats_.size(); ++k) flats_[k]->take_gradient_shard(reducer_->gradient_bucket(k));
}

void ShardedModel::after_step() {
  if (stage_ == 3) return;
  for (auto& flat : flats_) {
    flat->publish_shard();
    // Stage 1's gradient slices are taken again for each step.
    if (stage_ == 1) flat->shard().mutable_grad().reset();
  }
}

void ShardedModel::zero_grad(bool set_to_none) {
  if (stage_ != 1) return;
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params_) {
    at::Tensor& grad = p.mutable_grad();
    if (!grad.defined()) continue;
    if (set_to_none) {
      grad.reset();
    } else {
      grad = grad.detach();
      grad.zero_();
    }
  }
}

}  // namespace accel
