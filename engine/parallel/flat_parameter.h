// Parameters of one dtype and one optimizer group laid end to end in one flat
// buffer, padded with zeros to a multiple of the world size and cut into equal
// shards, one per rank: rank r owns elements [r*S, (r+1)*S) of the layout. Each
// parameter's data becomes a tensor over the buffer's storage, so the model
// computes with the buffer as it is and an update of the buffer is an update of
// the model.
//
// What a rank keeps depends on the sharding stage (engine/parallel/sharded_model.h):
// the optimizer always steps shard(), this rank's slice, whose .grad is this rank's
// slice of the gradients. Stages 2 and 3 build that slice during backward
// (add_gradient: each parameter's gradient is copied into a reduction buffer and
// dropped; the buffer is reduce-scattered once every parameter's is in) and keep no
// full gradient. Stage 3 also frees the full buffer between uses (release) and
// all-gathers it from the shards when it is needed (gather, prefetch).
//
// Note [parameters from rank 0]: the constructor broadcasts the flat buffer
// from rank 0, so every rank starts from the main process's values, as FSDP's
// sync_module_states. A parameter on the meta device (a model built under
// accel.init_empty_weights on a rank other than 0) holds no values to copy:
// it is replaced in params() by a new leaf tensor over the buffer, as
// LibTorch cannot give a meta tensor storage in place; the owner points the
// model and its optimizer at the replacement. The owner makes one flat
// parameter at a time and, at stage 3, releases it before the next, so such
// a rank never holds the whole model (sharded_model.h).
//
// Note [freed parameters]: release() frees the buffer's bytes by emptying its
// storage, not by dropping the tensor: tensors autograd saved during the forward
// (views of a weight, the weight itself) share that storage and see the bytes again
// once gather() refills it, as FSDP does. The parameters themselves are pointed at
// empty tensors meanwhile, so a recipe reading one outside forward and backward
// sees an empty tensor rather than freed memory.
//
// Note [offload]: after offload_to_host (engine/parallel/cpu_offload.h) the
// shard is a host tensor of its own at every stage (not a view of the full
// buffer at stages 1 and 2), and so is its gradient: a gather sends a copy of
// the shard on the buffer's device (sent_), a reduce-scatter's slice and
// stage 1's slice of the all-reduced gradients are copied to the host, and
// publish_shard sends the updated shard from a copy on the device.
//
// Note [mixed precision]: under a MixedPrecisionPolicy whose param_dtype is
// not the parameters' own (stage 3 only), the shard keeps the parameters'
// dtype (the optimizer steps it) and the full buffer, which the model
// computes with, is in param_dtype: a gather casts this rank's shard first,
// so the all-gather carries param_dtype's bytes. Gradients (param_dtype) are
// reduce-scattered in reduce_dtype and added to the shard's gradient in the
// shard's dtype. gather_full_precision() gathers the shards' own values
// instead (for reading or writing the weights, where param_dtype would
// round them).
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/parallel/cpu_offload.h"
#include "engine/parallel/mixed_precision_policy.h"

namespace accel {

class Communicator;
class PendingOp;

class FlatParameter {
 public:
  // With `shard_parameters` (stage 3) this rank keeps its shard in storage
  // of its own, and the full buffer can be released. The buffer is made on
  // `device` and filled with rank 0's values (Note [parameters from rank 0]).
  // `precision` applies to stages 2 and 3 (reduce_dtype) and, for
  // param_dtype, to stage 3 (Note [mixed precision]).
  FlatParameter(Communicator& comm, std::vector<at::Tensor> params, bool shard_parameters, at::Device device,
                MixedPrecisionPolicy precision = {});
  ~FlatParameter();
  FlatParameter(const FlatParameter&) = delete;
  FlatParameter& operator=(const FlatParameter&) = delete;

  // The model's parameters: those given, a meta one replaced by its new tensor.
  const std::vector<at::Tensor>& params() const { return params_; }
  // params()[i]'s first element in the flat layout.
  int64_t offset(size_t i) const { return offsets_[i]; }
  // params()[i]'s shape, also while it is released (stage 3).
  at::IntArrayRef shape(size_t i) const { return views_[i].sizes(); }
  int64_t param_numel(size_t i) const { return views_[i].numel(); }
  int64_t numel() const { return numel_; }
  int64_t shard_numel() const { return shard_numel_; }
  // How many of this rank's shard elements are parameters' (the rest, at
  // the end of the last shards, is padding).
  int64_t shard_content_numel() const;
  int rank() const;
  int world_size() const;
  // The slice the optimizer steps (a leaf tensor; its .grad is the gradient shard).
  at::Tensor& shard() { return shard_; }
  // The device the full buffer (the model's parameters) is on.
  at::Device device() const { return full_.device(); }

  // Moves the shard to the host (Note [offload]); before the optimizer is
  // pointed at it and before any gradient.
  void offload_to_host(const CpuOffload& offload);
  bool offloaded() const { return offloaded_; }

  // Stage 3. gather() waits for a prefetch under way, or all-gathers now;
  // prefetch() starts the all-gather without waiting; both do nothing when the
  // buffer is already there. release() waits for a prefetch, then frees.
  bool gathered() const { return gathered_; }
  void gather();
  void prefetch();
  void release();
  // Stage 3: gathered in the shard's own dtype, not param_dtype (Note
  // [mixed precision]); the same as gather() without a param_dtype. Until
  // release(), the parameters are views of that full-precision buffer.
  void gather_full_precision();
  // Stage 3, while gathered: the full buffer was written (a loaded
  // checkpoint): this rank's shard takes its slice of it.
  void keep_written_slice();

  // Stages 2 and 3: params()[i]'s gradient is ready. It goes into the reduction
  // buffer and the parameter's .grad is dropped; returns true when it was the
  // last one and the buffer was reduce-scattered into the gradient shard.
  bool add_gradient(size_t i);
  // Ends a backward: a buffer that got some gradients but not all (parameters
  // unused in this forward count as zeros) is reduce-scattered now. Returns
  // whether it was.
  bool flush_gradients();
  // Whether a backward is putting gradients into the reduction buffer.
  bool reducing() const { return bucket_.defined(); }

  // Stage 1: the gradient shard from this rank's slice of the parameters' full
  // (already all-reduced) gradients; undefined when no parameter has one.
  // `bucket` is the gradient reducer's bucket laid out as this flat
  // parameter (GradientReducer::BucketLayout): when every parameter's
  // gradient is its slot there, the shard's is a view of the bucket, not a
  // copy of a shard's size made each step.
  void take_gradient_shard(const at::Tensor& bucket);
  // Stages 1 and 2, after the optimizer step: every rank's updated shard into
  // the full buffer, so that every rank's parameters are the updated ones.
  void publish_shard();

 private:
  // Whether every parameter's gradient lies at its offset in `bucket`.
  bool gradients_in(const at::Tensor& bucket) const;

  Communicator& comm_;
  std::vector<at::Tensor> params_;
  std::vector<int64_t> offsets_;
  int64_t numel_ = 0;
  int64_t shard_numel_ = 0;
  at::Tensor full_;                 // [world * shard_numel], in param_dtype
  at::Tensor full_precision_;       // gather_full_precision's buffer, until release
  at::Tensor sent_;                 // the shard a gather under way sends, when a copy (on the device, cast)
  c10::ScalarType reduce_dtype_;
  std::vector<at::Tensor> views_;   // params_[i]'s shape over full_'s storage
  at::Tensor shard_;
  at::Tensor bucket_;               // gradients being gathered for a reduce-scatter
  std::vector<bool> received_;
  size_t waiting_ = 0;
  bool gathered_ = true;
  std::unique_ptr<PendingOp> pending_gather_;
  bool offloaded_ = false;
  CpuOffload offload_;

  void reduce_bucket();
  void wait_gather();
  // The parameters as views of `buffer` (full_ or full_precision_), or, with
  // an undefined one, empty tensors (Note [freed parameters]).
  void point_params_at(const at::Tensor& buffer);
};

}  // namespace accel
