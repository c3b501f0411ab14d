// Sharded data parallel for one model, as DeepSpeed's ZeRO stages define it:
//   stage 1: each rank keeps the optimizer state of its 1/N of the parameters.
//     Gradients are all-reduced as in plain data parallel (GradientReducer);
//     before the step each rank takes its slice of them, steps its shard, and
//     the updated shards are all-gathered into every rank's parameters.
//   stage 2: also gradients. Each flat parameter's gradients are
//     reduce-scattered during backward, as soon as its last one is ready, and a
//     rank keeps only its slice (FlatParameter::add_gradient). Every backward
//     reduces, also on micro-steps of accumulation that do not step: the slice
//     accumulates there, so no rank ever holds a full gradient between
//     micro-steps (DeepSpeed does the same; no_sync saves no communication).
//   stage 3: also parameters. The units the wrap policy chose are all-gathered
//     just before their forward (the next unit's gather is started early) and
//     released after it; gathered again when backward reaches them (a hook on
//     their outputs; the unit before them is prefetched) and released once
//     their gradients are reduce-scattered. Unit 0 is the root: the parameters
//     of no wrapped module, gathered for the whole forward and backward.
//
// Flat parameters hold parameters of one dtype and one optimizer group (the
// optimizer's group hyper-parameters apply to whole shards). At stages 1 and 2
// a unit is cut into flat parameters of at most `bucket_bytes`, last parameters
// first, as GradientReducer's buckets are. The optimizer is pointed at the
// shards (shard_optimizer) and steps them; the model computes with full
// parameters, at stage 3 only while a unit is gathered.
//
// Every flat parameter starts from rank 0's values; a rank other than 0 may
// give parameters on the meta device, which get memory flat parameter by flat
// parameter (Note [parameters from rank 0] in flat_parameter.h). The model's
// parameters are then new tensors: unit_parameters() tells the owner which,
// and shard_optimizer takes the meta ones the optimizer holds for theirs.
//
// A parameter unused in a backward on every rank takes part with zeros; the
// ranks must run the same graph (the reduce-scatters happen in the order
// gradients become ready).
//
// On a device mesh (docs/api/parallelism.md) `comm` is the shard group (the
// mesh's dp_shard), not the world, and MeshGroups says what lies around it:
//   replicate (HSDP, the mesh's dp_replicate): each shard has a replica in
//     every group rank; a synchronised backward's gradient slices are
//     all-reduced over it in finalize (once per optimizer step, not per
//     micro-step: they add up in the slices meanwhile), and the divisor is
//     the data-parallel degree, shard size x replicate size.
//   tp (tensor parallel, applied before sharding): the model holds this tp
//     rank's slices; `tp_split` names the parameters split over tp, which
//     go into flat parameters of their own, so that the gradient norm sums
//     their parts over tp and counts the others (equal on every tp rank)
//     once.
// Context parallelism joins by making `comm` the dp_shard x cp group
// flattened (torchtitan's dp_shard_cp): the shards, the divisor and the
// norm follow from the group's size with no change here.
#pragma once
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/parallel/cpu_offload.h"
#include "engine/parallel/gradient_sync.h"
#include "engine/parallel/mixed_precision_policy.h"

namespace accel {

class Communicator;
class FlatParameter;
class GradientReducer;

namespace optim {
class Optimizer;
}

// The groups around the shard group on a device mesh (above); none off a mesh.
struct MeshGroups {
  Communicator* replicate = nullptr;
  Communicator* tp = nullptr;
  std::vector<at::Tensor> tp_split;
};

class ShardedModel : public GradientSync {
 public:
  // `units[0]` holds the root's parameters (every parameter at stages 1 and
  // 2), `units[k]` those of the k-th wrapped module; `optimizer` says which
  // group each parameter is in (parameters it does not hold form a group of
  // their own). Flat buffers are made on `device`. `comm` (and `mesh`'s
  // groups) must outlive this. A replicate group needs stage 2 or 3.
  // `precision` (FSDP's MixedPrecisionPolicy, Note [mixed precision] in
  // flat_parameter.h) needs stage 3 for a param_dtype, 2 or 3 for a
  // reduce_dtype.
  ShardedModel(Communicator& comm, int stage, const std::vector<std::vector<at::Tensor>>& units,
               const optim::Optimizer& optimizer, int64_t bucket_bytes, at::Device device,
               MeshGroups mesh = {}, MixedPrecisionPolicy precision = {});
  ~ShardedModel() override;
  ShardedModel(const ShardedModel&) = delete;
  ShardedModel& operator=(const ShardedModel&) = delete;

  int stage() const { return stage_; }
  int64_t num_flat_parameters() const { return static_cast<int64_t>(flats_.size()); }
  FlatParameter& flat_parameter(size_t k) { return *flats_[k]; }

  // The units' parameters in the order the constructor got them, each the
  // tensor the model computes with now: a meta one given is replaced.
  std::vector<std::vector<at::Tensor>> unit_parameters() const;

  // Replaces, group by group, each parameter of this model in `optimizer`
  // (a meta one given, or its replacement) with the shard of its flat
  // parameter. Fails, naming the group, when a flat parameter's parameters
  // are split over groups; the optimizer must hold no state yet.
  void shard_optimizer(optim::Optimizer& optimizer);
  // Keeps every shard, its gradient slice and so its optimizer state on the
  // host, where the optimizer steps them (engine/parallel/cpu_offload.h);
  // called before shard_optimizer.
  void offload_to_host(const CpuOffload& offload);

  // Where flat parameter `flat`'s parameters came from: for each, its unit
  // and its position in that unit's list as the constructor got them (both
  // from 0). A checkpoint names parameters through these.
  struct Origin {
    size_t unit = 0;
    size_t position = 0;
  };
  const std::vector<Origin>& origins(size_t flat) const { return origins_[flat]; }

  // The sharded optimizer's own indices for a checkpoint keyed by flat
  // parameter (SHARDED_STATE_DICT): each shard's index in `optimizer` now
  // (-1 for a flat parameter the optimizer does not step), and each flat parameter's parameters' indices in the layout before
  // shard_optimizer (-1 for one the optimizer did not hold).
  struct FlatIndices {
    int64_t shard = -1;
    std::vector<int64_t> original;
  };
  std::vector<FlatIndices> optimizer_indices(const optim::Optimizer& optimizer) const;
  // How many parameters each of the optimizer's groups held before
  // shard_optimizer: the groups of the full state.
  std::vector<int64_t> original_group_sizes() const;

  // The sharded optimizer's state in the layout the optimizer had before
  // shard_optimizer (state.<i>.<slot> of each original parameter, full
  // size): what plain data parallel saves, loadable on any world size and
  // any stage. A collective (each slot's shards are all-gathered).
  std::vector<std::pair<std::string, at::Tensor>> full_optimizer_state(const optim::Optimizer& optimizer) const;
  // The reverse, without communication: each rank takes its slices.
  void load_full_optimizer_state(optim::Optimizer& optimizer,
                                 const std::vector<std::pair<std::string, at::Tensor>>& full) const;

  // Stage 3: the unit's forward begins (gathers it, prefetches the next
  // one) or ends (hooks its outputs that need a gradient, so that backward
  // gathers it again, and releases it unless `keep`). Elsewhere no-ops.
  // A forward that recomputes a checkpointed block in backward
  // (engine/activation_checkpoint.h) prefetches nothing and keeps the unit
  // gathered until its gradients are reduced.
  void before_forward(size_t unit);
  void after_forward(size_t unit, const std::vector<at::Tensor>& outputs, bool keep);
  // Stage 3: every unit gathered (to read or write the full parameters, in
  // the shards' dtype whatever the param_dtype), or released again.
  void gather_all();
  void release_all();
  // Stage 3, between gather_all and release_all: the full parameters were
  // written (loaded); each rank's shards take their slices.
  void keep_written_parameters();

  // Gradient synchronisation (gradient_sync.h): set_sync says whether the
  // next backward synchronises (stage 1; stages 2 and 3 reduce every
  // backward, and there it says whether a backward that ends itself is
  // finalized, divided by the ranks); end_backward ends every
  // backward (stages 2 and 3: reduces what is left, releases stage 3's
  // units); finalize(num_items) ends a synchronised one and divides the
  // gradients by the items of all ranks, or by the number of ranks.
  void set_sync(bool sync) override;
  bool sync() const override;
  void caller_finishes_backward() override;
  void end_backward() override;
  void finalize(int64_t num_items) override;

  // The shard group (the world off a mesh): a flat parameter's shards are
  // its ranks'. Checkpoints under a mesh read shards through it.
  Communicator& shard_group() const { return comm_; }
  // Whether flat parameter `flat` holds parameters split over tp (MeshGroups).
  bool split_over_tp(size_t flat) const { return flat_split_[flat]; }

  // The gradient norm over every rank's slices and clipping to `max_norm`
  // (stages 2 and 3, where no rank holds the full gradients); on a mesh,
  // the model's whole norm (MeshGroups). grad_norm is the norm alone (a
  // collective), for a caller that adds gradients kept outside the flat
  // parameters (experts split over ep) before it clips.
  at::Tensor grad_norm(double norm_type) const;
  at::Tensor clip_grad_norm(double max_norm, double norm_type);
  void clip_grad_value(double clip_value);
  // The shards (their .grad the gradient slices), e.g. for the fp16 loss
  // scaler; an overflow in one rank's slice must be agreed on by all.
  std::vector<at::Tensor> shards() const;

  // Around the optimizer's step: stage 1 takes the gradient slices before;
  // stages 1 and 2 all-gather the updated shards after.
  void before_step();
  void after_step();
  // The model's full gradients (stage 1) are the recipe's to clear.
  void zero_grad(bool set_to_none);

 private:
  struct Unit {
    std::vector<size_t> flats;
  };
  Communicator& comm_;
  MeshGroups mesh_;
  int stage_;
  std::vector<std::unique_ptr<FlatParameter>> flats_;
  std::vector<bool> flat_split_;  // per flat parameter: its parameters are split over tp
  std::vector<std::vector<Origin>> origins_;  // per flat parameter
  std::vector<Unit> units_;
  std::vector<at::Tensor> params_;  // every parameter, for stage 1's reducer
  // Meta parameters given -> their replacements, until shard_optimizer has
  // pointed the optimizer away from the meta ones (which this keeps alive).
  std::unordered_map<const c10::TensorImpl*, std::pair<at::Tensor, at::Tensor>> replaced_;
  std::unique_ptr<GradientReducer> reducer_;  // stage 1
  // The optimizer's groups before shard_optimizer: the layout of the full state.
  std::vector<std::vector<at::Tensor>> original_groups_;
  std::vector<size_t> forward_order_;  // units in the order the first forward ran them
  std::vector<int64_t> position_;      // unit -> index in forward_order_, or -1
  struct Hook;
  std::vector<std::unique_ptr<Hook>> hooks_;
  bool sync_ = true;
  bool caller_finishes_ = false;  // the next backward is the caller's to end
  bool pass_pending_ = false;     // end_of_pass is queued for autograd's pass

  void hook_gradients(size_t flat);
  void gather_unit(size_t unit);
  void prefetch_unit(size_t unit);
  void release_unit(size_t unit);
  void on_gradient(size_t flat, size_t param);
  void end_of_pass();
  void before_backward(size_t unit);
};

}  // namespace accel
