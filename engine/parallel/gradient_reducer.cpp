#include "engine/parallel/gradient_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <mutex>

#include "engine/comm/communicator.h"

namespace accel {

namespace {

struct Bucket {
  std::vector<size_t> params;  // indices into Impl::params
  std::vector<int64_t> offsets;
  int64_t numel = 0;  // gradient elements; the used flags (and the item count) follow them
  at::Tensor buffer;
  size_t waiting = 0;  // parameters whose gradient has not arrived yet
  std::unique_ptr<PendingOp> pending;
};

}  // namespace

struct GradientReducer::Impl {
  GradientReducer& owner;
  Communicator& comm;
  // One process on its own: no buckets, no hooks; finalize only divides.
  bool alone = false;
  // Whether the last bucket's element after the used flags holds the item
  // count: only where its dtype counts exactly (float32: 2^24 items per
  // step); otherwise finalize sums the counts in a collective of their own.
  bool last_bucket_counts_items = false;
  std::vector<at::Tensor> params;
  std::vector<Bucket> buckets;
  std::vector<size_t> bucket_of;  // parameter -> bucket
  std::vector<size_t> slot_of;    // parameter -> position in its bucket
  std::vector<bool> ready;
  size_t next_to_start = 0;  // buckets start strictly in order on every rank
  bool sync = true;
  bool overlap = true;
  bool in_backward = false;
  // The caller ends the next backward (GradientSync::caller_finishes_backward);
  // otherwise the end of autograd's pass does (end_of_pass).
  bool caller_finishes = false;
  std::vector<Event> events;
  std::vector<std::pair<std::shared_ptr<torch::autograd::Node>, uintptr_t>> hooks;
  mutable std::mutex mutex;

  Impl(GradientReducer& o, Communicator& c) : owner(o), comm(c) {}

  // Checks the parameters and says whether buckets are needed: not for a
  // process alone. A communicator of one rank that still communicates
  // (NCCL named on one GPU, to check it) gets buckets like any world.
  bool begin_layout() {
    for (size_t k = 0; k < params.size(); ++k) {
      TORCH_CHECK(params[k].requires_grad() && params[k].is_leaf(), "parameter ", k,
                  " is not a leaf tensor that requires grad");
    }
    alone = comm.size() == 1 && comm.backend() == "none";
    if (alone) return false;
    bucket_of.resize(params.size());
    slot_of.resize(params.size());
    ready.assign(params.size(), false);
    return true;
  }

  // Parameter k takes the next slot of the last bucket, after the elements
  // that bucket has so far.
  void place(size_t k) {
    Bucket& b = buckets.back();
    bucket_of[k] = buckets.size() - 1;
    slot_of[k] = b.params.size();
    b.params.push_back(k);
    b.offsets.push_back(b.numel);
    b.numel += params[k].numel();
  }

  // Makes the buffers (zeros: padding is never written) and the hooks.
  void finish_layout();

  void begin_backward() {
    in_backward = true;
    events.clear();
    next_to_start = 0;
    std::fill(ready.begin(), ready.end(), false);
    for (Bucket& b : buckets) {
      b.waiting = b.params.size();
      // Only the used flags: every gradient slot is written by fill_slot,
      // and zeroing the whole buffer would be one more pass over it.
      b.buffer.narrow(0, b.numel, static_cast<int64_t>(b.params.size())).zero_();
      b.pending.reset();
    }
  }

  // Parameter i's slot in its bucket, shaped as the parameter.
  at::Tensor slot_view(size_t i) {
    const Bucket& b = buckets[bucket_of[i]];
    return b.buffer.narrow(0, b.offsets[slot_of[i]], params[i].numel()).view(params[i].sizes());
  }

  // Puts parameter i's gradient (or zeros) and its used flag into its
  // bucket. A gradient that is not yet its slot (the first backward, or one
  // after zero_grad set it to None) is copied in and then replaced by the
  // slot: see Note [gradients as bucket views].
  void fill_slot(size_t i) {
    Bucket& b = buckets[bucket_of[i]];
    size_t slot = slot_of[i];
    at::Tensor& grad = params[i].mutable_grad();
    at::Tensor target = slot_view(i);
    if (grad.defined()) {
      if (!grad.is_alias_of(target)) {
        target.copy_(grad);
        grad = target;
      }
      b.buffer[b.numel + static_cast<int64_t>(slot)].fill_(1);
    } else {
      target.zero_();
    }
  }

  // The last bucket waits for finalize(), which knows the item count.
  void start_ready_buckets(size_t end) {
    while (next_to_start < end && buckets[next_to_start].waiting == 0) {
      Bucket& b = buckets[next_to_start];
      events.push_back({Event::Kind::BucketStarted, static_cast<int64_t>(next_to_start)});
      b.pending = comm.all_reduce_async(b.buffer, ReduceOp::Sum);
      ++next_to_start;
    }
  }

  void on_gradient(size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!sync) return;
    if (!in_backward) {
      begin_backward();
      torch::autograd::Engine::get_default_engine().queue_callback([this] { end_of_pass(); });
    }
    TORCH_CHECK(!ready[i], "parameter ", i,
                " received its gradient twice in one synchronised backward; "
                "call backward once per step (or use no_sync for the extra passes)");
    ready[i] = true;
    events.push_back({Event::Kind::GradientReady, static_cast<int64_t>(i)});
    at::NoGradGuard no_grad;
    fill_slot(i);
    --buckets[bucket_of[i]].waiting;
    if (overlap) start_ready_buckets(buckets.size() - 1);
  }

  // Autograd's pass is complete: a backward nobody announced (a plain
  // loss:backward()) is finished here, as DDP finishes every backward, so
  // its gradients are the average over ranks when it returns.
  void end_of_pass() {
    bool finish = false;
    {
      std::lock_guard<std::mutex> lock(mutex);
      finish = !caller_finishes && in_backward;
    }
    if (finish) owner.finalize(0);
  }

  // The items of all ranks: the last bucket's count slot, or a collective
  // of its own where that bucket cannot hold it.
  double all_items(int64_t num_items) {
    if (last_bucket_counts_items) {
      const Bucket& last = buckets.back();
      return last.buffer[last.numel + static_cast<int64_t>(last.params.size())].item<double>();
    }
    at::Tensor count = at::full({1}, static_cast<double>(num_items), buckets.back().buffer.options().dtype(at::kDouble));
    comm.all_reduce(count, ReduceOp::Sum);
    return count.item<double>();
  }

  // Alone: the gradients are this rank's; only a count of items divides them.
  void finalize_alone(int64_t num_items) {
    if (num_items <= 0) return;
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params) {
      if (p.grad().defined()) p.mutable_grad().div_(static_cast<double>(num_items));
    }
  }
};

GradientReducer::GradientReducer(Communicator& comm, std::vector<at::Tensor> params,
                                 int64_t bucket_bytes, bool overlap)
    : impl_(std::make_unique<Impl>(*this, comm)) {
  TORCH_CHECK(bucket_bytes > 0, "bucket size must be positive, got ", bucket_bytes);
  Impl& s = *impl_;
  s.overlap = overlap;
  s.params = std::move(params);
  if (!s.begin_layout()) return;
  int64_t filled = 0;
  for (size_t k = s.params.size(); k-- > 0;) {  // last parameters first: their gradients come first
    const at::Tensor& p = s.params[k];
    int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    bool fits = !s.buckets.empty() && filled + bytes <= bucket_bytes &&
                s.params[s.buckets.back().params.front()].scalar_type() == p.scalar_type();
    if (!fits) {
      s.buckets.emplace_back();
      filled = 0;
    }
    s.place(k);
    filled += bytes;
  }
  s.finish_layout();
}

GradientReducer::GradientReducer(Communicator& comm, std::vector<BucketLayout> buckets)
    : impl_(std::make_unique<Impl>(*this, comm)) {
  Impl& s = *impl_;
  for (const BucketLayout& layout : buckets) {
    s.params.insert(s.params.end(), layout.params.begin(), layout.params.end());
  }
  if (!s.begin_layout()) return;
  size_t k = 0;
  for (const BucketLayout& layout : buckets) {
    TORCH_CHECK(!layout.params.empty(), "a gradient bucket needs at least one parameter");
    s.buckets.emplace_back();
    for (const at::Tensor& p : layout.params) {
      TORCH_CHECK(p.scalar_type() == layout.params.front().scalar_type(),
                  "the parameters of a gradient bucket share one dtype; got ", p.scalar_type(), " next to ",
                  layout.params.front().scalar_type());
      s.place(k++);
    }
    Bucket& b = s.buckets.back();
    TORCH_CHECK(layout.numel >= b.numel, "a gradient bucket of ", layout.numel, " elements cannot hold its ",
                b.numel);
    b.numel = layout.numel;
  }
  s.finish_layout();
}

void GradientReducer::Impl::finish_layout() {
  if (!buckets.empty()) {
    const at::ScalarType last_dtype = params[buckets.back().params.front()].scalar_type();
    last_bucket_counts_items = last_dtype == at::kFloat || last_dtype == at::kDouble;
  }
  for (Bucket& b : buckets) {
    const at::Tensor& first = params[b.params.front()];
    const bool counts = &b == &buckets.back() && last_bucket_counts_items;
    b.buffer = at::zeros({b.numel + static_cast<int64_t>(b.params.size()) + (counts ? 1 : 0)},
                         first.options().requires_grad(false));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params[i]);
    uintptr_t key = accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [this, i](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          on_gradient(i);
          return outputs;
        }));
    // Holding the accumulator keeps it (and the hook) alive: a parameter only
    // references its accumulator weakly.
    hooks.emplace_back(std::move(accumulator), key);
  }
}

GradientReducer::~GradientReducer() {
  for (auto& [accumulator, key] : impl_->hooks) accumulator->del_post_hook(key);
}

void GradientReducer::set_sync(bool sync) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->sync = sync;
}

bool GradientReducer::sync() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->sync;
}

void GradientReducer::caller_finishes_backward() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->caller_finishes = true;
}

void GradientReducer::end_backward() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->caller_finishes = false;
}

int64_t GradientReducer::num_buckets() const { return static_cast<int64_t>(impl_->buckets.size()); }

at::Tensor GradientReducer::gradient_bucket(size_t k) const {
  if (impl_->alone) return {};
  const Bucket& b = impl_->buckets.at(k);
  return b.buffer.narrow(0, 0, b.numel);
}

std::vector<GradientReducer::Event> GradientReducer::last_events() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->events;
}

void GradientReducer::finalize(int64_t num_items) {
  Impl& s = *impl_;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.sync) return;
  if (s.alone) return s.finalize_alone(num_items);
  if (s.buckets.empty()) return;
  // One recipe line for every bucket started here, read once.
  PinnedCallSite site(current_call_site());
  // No gradient arrived at all (nothing of this model was used): still take
  // part, so every rank issues the same all-reduces.
  if (!s.in_backward) s.begin_backward();
  s.in_backward = false;
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < s.params.size(); ++i) {
    if (s.ready[i]) continue;
    s.fill_slot(i);
    --s.buckets[s.bucket_of[i]].waiting;
  }
  if (s.last_bucket_counts_items) {
    Bucket& last = s.buckets.back();
    last.buffer[last.numel + static_cast<int64_t>(last.params.size())].fill_(static_cast<double>(num_items));
  }
  s.start_ready_buckets(s.buckets.size());
  for (Bucket& b : s.buckets) b.pending->wait();
  const double items = s.all_items(num_items);
  const double divisor = items > 0 ? items : static_cast<double>(s.comm.size());
  for (Bucket& b : s.buckets) {
    // The gradients are the bucket's slots: dividing them in place is the
    // write-back.
    b.buffer.narrow(0, 0, b.numel).div_(divisor);
    at::Tensor used = b.buffer.narrow(0, b.numel, static_cast<int64_t>(b.params.size()));
    at::Tensor used_on_any_rank = used.gt(0).to(at::kCPU).contiguous();
    const bool* used_flags = used_on_any_rank.data_ptr<bool>();
    for (size_t slot = 0; slot < b.params.size(); ++slot) {
      const size_t i = b.params[slot];
      // Unused here but used elsewhere: the others' average becomes its gradient.
      if (!s.params[i].grad().defined() && used_flags[slot]) s.params[i].mutable_grad() = s.slot_view(i);
    }
  }
}

}  // namespace accel
