#include "engine/parallel/flat_parameter.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

#include <algorithm>

#include "engine/comm/communicator.h"

namespace accel {

namespace {

// A plain tensor (not an autograd view) of `sizes` over `base`'s storage from
// element `offset` of `base`: what set_data can point a parameter at.
at::Tensor over_storage(const at::Tensor& base, int64_t offset, at::IntArrayRef sizes) {
  return at::empty({0}, base.options()).set_(base.storage(), base.storage_offset() + offset, sizes,
                                            c10::contiguous_strides(sizes));
}

}  // namespace

FlatParameter::FlatParameter(Communicator& comm, std::vector<at::Tensor> params, bool shard_parameters,
                             at::Device device, MixedPrecisionPolicy precision)
    : comm_(comm), params_(std::move(params)) {
  TORCH_CHECK(!params_.empty(), "a flat parameter needs at least one parameter");
  at::NoGradGuard no_grad;
  const at::Tensor& first = params_.front();
  for (const at::Tensor& p : params_) {
    TORCH_CHECK(p.scalar_type() == first.scalar_type(), "the parameters of a flat parameter share one dtype; got ",
                p.scalar_type(), " next to ", first.scalar_type());
    TORCH_CHECK(!p.is_meta() || comm_.rank() != 0, "sharding: a parameter of shape ", p.sizes(),
                " is on the meta device on rank 0, whose values every rank takes");
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  const int64_t world = comm_.size();
  shard_numel_ = std::max<int64_t>(1, (numel_ + world - 1) / world);
  full_ = at::empty({world * shard_numel_}, first.options().device(device).requires_grad(false));
  full_.narrow(0, numel_, full_.numel() - numel_).zero_();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].is_meta()) full_.narrow(0, offsets_[i], params_[i].numel()).copy_(params_[i].reshape(-1));
  }
  if (world > 1) comm_.broadcast(full_, 0);
  const int64_t begin = rank() * shard_numel_;
  // Released by the owner once it has made the parameters' gradient
  // accumulators, which record each parameter's shape (and dtype) when made.
  if (shard_parameters) shard_ = full_.narrow(0, begin, shard_numel_).clone();
  if (precision.param_dtype && *precision.param_dtype != full_.scalar_type()) {
    TORCH_CHECK(shard_parameters, "sharding: a param_dtype (", *precision.param_dtype, " for ", full_.scalar_type(),
                " parameters) needs stage 3, where the parameters are gathered from their shards");
    full_ = full_.to(*precision.param_dtype);  // Note [mixed precision]
  }
  reduce_dtype_ = precision.reduce_dtype.value_or(full_.scalar_type());
  for (size_t i = 0; i < params_.size(); ++i) {
    views_.push_back(over_storage(full_, offsets_[i], params_[i].sizes()));
    if (params_[i].is_meta()) {
      at::Tensor replacement = over_storage(full_, offsets_[i], params_[i].sizes());
      replacement.set_requires_grad(true);
      params_[i] = std::move(replacement);
    }
  }
  point_params_at(full_);
  if (!shard_parameters) shard_ = over_storage(full_, begin, {shard_numel_});
  shard_.set_requires_grad(true);
}

FlatParameter::~FlatParameter() {
  if (pending_gather_) pending_gather_->wait();
}

void FlatParameter::wait_gather() {
  if (!pending_gather_) return;
  pending_gather_->wait();
  pending_gather_.reset();
  sent_.reset();
}

int FlatParameter::rank() const { return comm_.rank(); }

void FlatParameter::offload_to_host(const CpuOffload& offload) {
  TORCH_CHECK(!shard_.grad().defined(), "a flat parameter is offloaded before its first gradient");
  at::NoGradGuard no_grad;
  shard_ = offload.to_host(shard_.detach());
  shard_.set_requires_grad(true);
  offload_ = offload;
  offloaded_ = true;
}

int64_t FlatParameter::shard_content_numel() const {
  return std::clamp<int64_t>(numel_ - rank() * shard_numel_, 0, shard_numel_);
}
int FlatParameter::world_size() const { return comm_.size(); }

void FlatParameter::point_params_at(const at::Tensor& buffer) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!buffer.defined()) {
      params_[i].set_data(at::empty({0}, full_.options()));
    } else {
      params_[i].set_data(buffer.is_same(full_) ? views_[i] : over_storage(buffer, offsets_[i], views_[i].sizes()));
    }
  }
}

void FlatParameter::gather() {
  wait_gather();
  if (gathered_) return;
  prefetch();
  wait_gather();
}

void FlatParameter::prefetch() {
  if (gathered_) return;
  // Refills the storage every view of the buffer shares (Note [freed parameters]).
  c10::StorageImpl* storage = full_.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(full_.numel()) * full_.element_size();
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
  // The shard the gather sends: on the buffer's device (Note [offload]) and
  // cast to param_dtype first, so that the gather carries param_dtype's
  // bytes (Note [mixed precision]); kept until the gather completes.
  at::Tensor source = offloaded_ ? CpuOffload::to_device(shard_.detach(), full_.device()) : shard_;
  if (source.scalar_type() != full_.scalar_type()) {
    at::NoGradGuard no_grad;
    source = source.to(full_.scalar_type());
  }
  if (!source.is_same(shard_)) sent_ = source;
  pending_gather_ = comm_.all_gather_into_async(full_, source);
  point_params_at(full_);
  gathered_ = true;
}

void FlatParameter::gather_full_precision() {
  if (shard_.scalar_type() == full_.scalar_type()) return gather();
  if (full_precision_.defined()) return;
  release();
  full_precision_ = at::empty({full_.numel()}, shard_.options().device(full_.device()).requires_grad(false));
  comm_.all_gather_into(full_precision_,
                        offloaded_ ? CpuOffload::to_device(shard_.detach(), full_.device()) : shard_);
  point_params_at(full_precision_);
  gathered_ = true;
}

void FlatParameter::release() {
  wait_gather();
  if (!gathered_) return;
  point_params_at(at::Tensor());
  if (full_precision_.defined()) {
    full_precision_.reset();
  } else {
    c10::StorageImpl* storage = full_.storage().unsafeGetStorageImpl();
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, full_.device()));
    storage->set_nbytes(0);
  }
  gathered_ = false;
}

void FlatParameter::keep_written_slice() {
  TORCH_CHECK(gathered_, "a released flat parameter has no full buffer to take a slice of");
  wait_gather();
  at::NoGradGuard no_grad;
  const at::Tensor& written = full_precision_.defined() ? full_precision_ : full_;
  at::Tensor slice = written.narrow(0, rank() * shard_numel_, shard_numel_);
  if (!slice.is_same(shard_)) shard_.copy_(slice);
}

bool FlatParameter::add_gradient(size_t i) {
  at::NoGradGuard no_grad;
  if (!bucket_.defined()) {
    bucket_ = at::zeros({full_.numel()}, full_.options().dtype(reduce_dtype_));
    received_.assign(params_.size(), false);
    waiting_ = params_.size();
  }
  TORCH_CHECK(!received_[i], "parameter ", i, " of a sharded unit received its gradient twice in one backward");
  received_[i] = true;
  --waiting_;
  at::Tensor& grad = params_[i].mutable_grad();
  if (grad.defined()) {
    bucket_.narrow(0, offsets_[i], params_[i].numel()).copy_(grad.reshape(-1));
    grad.reset();
  }
  if (waiting_ > 0) return false;
  reduce_bucket();
  return true;
}

bool FlatParameter::flush_gradients() {
  if (!bucket_.defined()) return false;
  at::NoGradGuard no_grad;
  reduce_bucket();
  return true;
}

void FlatParameter::reduce_bucket() {
  at::Tensor reduced = at::empty({shard_numel_}, bucket_.options());
  comm_.reduce_scatter(reduced, bucket_, ReduceOp::Sum);
  bucket_.reset();
  if (reduced.scalar_type() != shard_.scalar_type()) reduced = reduced.to(shard_.scalar_type());
  if (offloaded_) reduced = offload_.to_host(reduced);
  at::Tensor& grad = shard_.mutable_grad();
  if (grad.defined()) {
    grad.add_(reduced);  // micro-steps of accumulation add up in the shard
  } else {
    grad = reduced;
  }
}

void FlatParameter::take_gradient_shard(const at::Tensor& bucket) {
  at::NoGradGuard no_grad;
  const int64_t begin = rank() * shard_numel_;
  const int64_t end = begin + shard_numel_;
  if (gradients_in(bucket)) {
    at::Tensor slice = bucket.narrow(0, begin, shard_numel_);
    shard_.mutable_grad() = offloaded_ ? offload_.to_host(slice) : slice;
    return;
  }
  // Defined on every rank when any parameter has a gradient (the same on
  // every rank once all-reduced), so that all ranks' optimizers step alike
  // and hold the same state slots.
  at::Tensor grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& full_grad = params_[i].grad();
    if (!full_grad.defined()) continue;
    if (!grad.defined()) grad = at::zeros({shard_numel_}, shard_.options());
    const int64_t lo = std::max(begin, offsets_[i]);
    const int64_t hi = std::min(end, offsets_[i] + params_[i].numel());
    if (lo >= hi) continue;
    grad.narrow(0, lo - begin, hi - lo).copy_(full_grad.reshape(-1).narrow(0, lo - offsets_[i], hi - lo));
  }
  shard_.mutable_grad() = grad;
}

bool FlatParameter::gradients_in(const at::Tensor& bucket) const {
  if (!bucket.defined() || bucket.numel() != full_.numel() || bucket.scalar_type() != full_.scalar_type()) return false;
  const char* base = static_cast<const char*>(bucket.data_ptr());
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& grad = params_[i].grad();
    if (!grad.defined() || !grad.is_contiguous() ||
        grad.data_ptr() != base + offsets_[i] * static_cast<int64_t>(bucket.element_size())) {
      return false;
    }
  }
  return true;
}

void FlatParameter::publish_shard() {
  at::NoGradGuard no_grad;
  comm_.all_gather_into(full_, CpuOffload::to_device(shard_.detach(), full_.device()));
}

}  // namespace accel
