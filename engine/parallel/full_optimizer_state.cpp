// ShardedModel's conversion between the sharded optimizer's state (one
// entry per shard, state.<k>.<slot> of shard_numel elements) and the full
// state the optimizer had before sharding (state.<i>.<slot> of each original
// parameter), which is what plain data parallel saves: a checkpoint written
// under any stage loads under any other and on any world size.
#include <ATen/ATen.h>

#include <map>
#include <unordered_map>

#include "engine/comm/communicator.h"
#include "engine/optim/optimizer.h"
#include "engine/parallel/flat_parameter.h"
#include "engine/parallel/sharded_model.h"

namespace accel {

namespace {

using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

std::string state_key(size_t index, const std::string& slot) {
  return "state." + std::to_string(index) + "." + slot;
}

// Where an original parameter went: flat parameter `flat`, position `position`
// in it; or, for a parameter this model does not shard, the optimizer's
// current index of the parameter itself.
struct Placement {
  int64_t flat = -1;
  size_t position = 0;
  size_t current = 0;
};

// The optimizer's current parameter index of every shard and unsharded
// parameter, by tensor.
std::unordered_map<const c10::TensorImpl*, size_t> current_indices(const optim::Optimizer& optimizer) {
  std::unordered_map<const c10::TensorImpl*, size_t> out;
  size_t index = 0;
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params) out[p.unsafeGetTensorImpl()] = index++;
  }
  return out;
}

const at::Tensor* find(const std::map<std::string, at::Tensor>& dict, const std::string& key) {
  auto it = dict.find(key);
  return it == dict.end() ? nullptr : &it->second;
}

// Each original parameter's placement, in the original order.
std::vector<Placement> placements(const std::vector<std::vector<at::Tensor>>& original_groups,
                                  const std::vector<std::unique_ptr<FlatParameter>>& flats,
                                  const std::unordered_map<const c10::TensorImpl*, size_t>& current) {
  std::unordered_map<const c10::TensorImpl*, std::pair<size_t, size_t>> in_flat;
  for (size_t k = 0; k < flats.size(); ++k) {
    for (size_t i = 0; i < flats[k]->params().size(); ++i) {
      in_flat[flats[k]->params()[i].unsafeGetTensorImpl()] = {k, i};
    }
  }
  std::vector<Placement> out;
  for (const auto& group : original_groups) {
    for (const at::Tensor& p : group) {
      Placement place;
      auto found = in_flat.find(p.unsafeGetTensorImpl());
      if (found != in_flat.end()) {
        place.flat = static_cast<int64_t>(found->second.first);
        place.position = found->second.second;
        place.current = current.at(flats[found->second.first]->shard().unsafeGetTensorImpl());
      } else {
        place.current = current.at(p.unsafeGetTensorImpl());
      }
      out.push_back(place);
    }
  }
  return out;
}

}  // namespace

std::vector<ShardedModel::FlatIndices> ShardedModel::optimizer_indices(const optim::Optimizer& optimizer) const {
  TORCH_CHECK(!original_groups_.empty(), "sharding: the optimizer was not sharded by this model");
  const auto current = current_indices(optimizer);
  std::vector<FlatIndices> out(flats_.size());
  for (size_t k = 0; k < flats_.size(); ++k) {
    auto held = current.find(flats_[k]->shard().unsafeGetTensorImpl());
    if (held != current.end()) out[k].shard = static_cast<int64_t>(held->second);
    out[k].original.assign(flats_[k]->params().size(), -1);
  }
  const std::vector<Placement> places = placements(original_groups_, flats_, current);
  for (size_t i = 0; i < places.size(); ++i) {
    if (places[i].flat >= 0) out[static_cast<size_t>(places[i].flat)].original[places[i].position] = static_cast<int64_t>(i);
  }
  return out;
}

std::vector<int64_t> ShardedModel::original_group_sizes() const {
  std::vector<int64_t> out;
  for (const auto& group : original_groups_) out.push_back(static_cast<int64_t>(group.size()));
  return out;
}

StateDict ShardedModel::full_optimizer_state(const optim::Optimizer& optimizer) const {
  at::NoGradGuard no_grad;
  TORCH_CHECK(!original_groups_.empty(), "sharding: the optimizer was not sharded by this model");
  const StateDict sharded_list = optimizer.state_dict();
  const std::map<std::string, at::Tensor> sharded(sharded_list.begin(), sharded_list.end());
  const auto current = current_indices(optimizer);
  const std::vector<Placement> places = placements(original_groups_, flats_, current);
  // Every rank's slices of each flat parameter's slots, gathered in flat and
  // slot order (the same on every rank: every rank stepped every shard).
  std::vector<std::map<std::string, at::Tensor>> gathered(flats_.size());
  for (size_t k = 0; k < flats_.size(); ++k) {
    const size_t index = current.at(flats_[k]->shard().unsafeGetTensorImpl());
    for (const std::string& slot : optimizer.state_slots()) {
      const at::Tensor* value = find(sharded, state_key(index, slot));
      if (!value) continue;
      if (value->dim() == 0) {  // a step counter: the same on every rank
        gathered[k][slot] = *value;
        continue;
      }
      // Offloaded state is gathered on the model's device, where the
      // collective reads it (engine/parallel/cpu_offload.h).
      const at::Device device = flats_[k]->device();
      at::Tensor full = at::empty({flats_[k]->shard_numel() * comm_.size()}, value->options().device(device));
      comm_.all_gather_into(full, CpuOffload::to_device(value->contiguous(), device));
      gathered[k][slot] = full;
    }
  }
  StateDict out;
  for (size_t i = 0; i < places.size(); ++i) {
    const Placement& place = places[i];
    for (const std::string& slot : optimizer.state_slots()) {
      if (place.flat < 0) {
        if (const at::Tensor* value = find(sharded, state_key(place.current, slot))) {
          out.emplace_back(state_key(i, slot), *value);
        }
        continue;
      }
      const FlatParameter& flat = *flats_[static_cast<size_t>(place.flat)];
      const auto& slots = gathered[static_cast<size_t>(place.flat)];
      auto it = slots.find(slot);
      if (it == slots.end()) continue;
      at::Tensor value = it->second.dim() == 0
                             ? it->second.clone()
                             : it->second.narrow(0, flat.offset(place.position), flat.param_numel(place.position))
                                   .view(flat.shape(place.position))
                                   .clone();
      out.emplace_back(state_key(i, slot), value);
    }
  }
  // The groups: the original parameters' indices, the hyper-parameters as they are.
  size_t first = 0;
  for (size_t g = 0; g < original_groups_.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const auto n = static_cast<int64_t>(original_groups_[g].size());
    out.emplace_back(prefix + "params", at::arange(static_cast<int64_t>(first), static_cast<int64_t>(first) + n, at::kLong));
    for (const auto& [key, value] : optimizer.param_groups()[g].options) {
      out.emplace_back(prefix + key, at::scalar_tensor(value, at::kDouble));
    }
    first += original_groups_[g].size();
  }
  return out;
}

void ShardedModel::load_full_optimizer_state(optim::Optimizer& optimizer, const StateDict& full_list) const {
  at::NoGradGuard no_grad;
  TORCH_CHECK(!original_groups_.empty(), "sharding: the optimizer was not sharded by this model");
  const std::map<std::string, at::Tensor> full(full_list.begin(), full_list.end());
  const std::vector<Placement> places = placements(original_groups_, flats_, current_indices(optimizer));
  // The sharded state, entry by entry: unsharded parameters' as saved; each
  // shard's slot from the slices of its parameters this rank owns.
  std::map<size_t, std::map<std::string, at::Tensor>> state;  // current index -> slot -> tensor
  for (size_t i = 0; i < places.size(); ++i) {
    const Placement& place = places[i];
    for (const std::string& slot : optimizer.state_slots()) {
      const at::Tensor* value = find(full, state_key(i, slot));
      if (!value) continue;
      if (place.flat < 0) {
        state[place.current][slot] = *value;
        continue;
      }
      const FlatParameter& flat = *flats_[static_cast<size_t>(place.flat)];
      if (value->dim() == 0) {
        state[place.current][slot] = *value;
        continue;
      }
      TORCH_CHECK(value->numel() == flat.param_numel(place.position), "optimizer state '", state_key(i, slot),
                  "' has ", value->numel(), " elements; its parameter has ", flat.param_numel(place.position));
      at::Tensor& shard = state[place.current][slot];
      if (!shard.defined()) shard = at::zeros({flat.shard_numel()}, value->options());
      const int64_t begin = static_cast<int64_t>(comm_.rank()) * flat.shard_numel();
      const int64_t lo = std::max(begin, flat.offset(place.position));
      const int64_t hi = std::min(begin + flat.shard_numel(), flat.offset(place.position) + value->numel());
      if (lo < hi) {
        shard.narrow(0, lo - begin, hi - lo)
            .copy_(value->reshape(-1).narrow(0, lo - flat.offset(place.position), hi - lo));
      }
    }
  }
  StateDict sharded;
  for (const auto& [index, slots] : state) {
    for (const auto& [slot, value] : slots) sharded.emplace_back(state_key(index, slot), value);
  }
  // The groups as the sharded optimizer has them; the hyper-parameters saved.
  size_t first = 0;
  const auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::string prefix = "param_groups." + std::to_string(g) + ".";
    const auto n = static_cast<int64_t>(groups[g].params.size());
    sharded.emplace_back(prefix + "params", at::arange(static_cast<int64_t>(first), static_cast<int64_t>(first) + n, at::kLong));
    first += groups[g].params.size();
    for (const auto& [key, value] : groups[g].options) {
      const at::Tensor* saved = find(full, prefix + key);
      sharded.emplace_back(prefix + key, saved ? *saved : at::scalar_tensor(value, at::kDouble));
    }
  }
  optimizer.load_state_dict(sharded);
}

}  // namespace accel
