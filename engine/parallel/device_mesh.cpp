#include "engine/parallel/device_mesh.h"

#include <algorithm>
#include <stdexcept>

namespace accel {

std::string ParallelDims::describe() const {
  return "pp_size = " + std::to_string(pp) + ", dp_replicate_size = " + std::to_string(dp_replicate) +
         ", dp_shard_size = " + std::to_string(dp_shard) + ", cp_size = " + std::to_string(cp) +
         ", tp_size = " + std::to_string(tp) + ", ep_size = " + std::to_string(ep);
}

void ParallelDims::check(int world_size) const {
  for (int size : {pp, dp_replicate, dp_shard, cp, tp, ep}) {
    if (size < 1) {
      throw std::invalid_argument("ParallelismConfig: every size must be a positive integer, got " + describe());
    }
  }
  const long long product = 1LL * pp * dp_replicate * dp_shard * cp * tp;
  if (product != world_size) {
    throw std::invalid_argument("ParallelismConfig: the sizes (ep_size aside) multiply to " + std::to_string(product) +
                                " (" + describe() + ") but the world has " + std::to_string(world_size) +
                                " ranks; their product must be the world size");
  }
  if ((dp_shard * cp) % ep != 0) {
    throw std::invalid_argument("ParallelismConfig: ep_size = " + std::to_string(ep) +
                                " must divide dp_shard_size x cp_size = " + std::to_string(dp_shard * cp) +
                                ", the ranks expert parallelism borrows (" + describe() + ")");
  }
}

const std::array<const char*, DeviceMesh::kDims>& DeviceMesh::dim_names() {
  static const std::array<const char*, kDims> names{"pp", "dp_replicate", "dp_shard", "cp", "tp"};
  return names;
}

int DeviceMesh::dim_index(const std::string& name) {
  const auto& names = dim_names();
  for (int d = 0; d < kDims; ++d) {
    if (name == names[d]) return d;
  }
  throw std::invalid_argument("device mesh: no dim '" + name + "' (dims: pp, dp_replicate, dp_shard, cp, tp)");
}

DeviceMesh::DeviceMesh(const ParallelDims& dims, int world_size, int rank)
    : sizes_{dims.pp, dims.dp_replicate, dims.dp_shard, dims.cp, dims.tp}, ep_(dims.ep), rank_(rank) {
  dims.check(world_size);
  if (rank < 0 || rank >= world_size) {
    throw std::invalid_argument("device mesh: rank " + std::to_string(rank) + " is not in a world of " +
                                std::to_string(world_size) + " ranks");
  }
  int rest = rank;
  for (int d = kDims - 1; d >= 0; --d) {
    coords_[d] = rest % sizes_[d];
    rest /= sizes_[d];
  }
}

int DeviceMesh::rank_of(const std::array<int, kDims>& coords) const {
  int rank = 0;
  for (int d = 0; d < kDims; ++d) rank = rank * sizes_[d] + coords[d];
  return rank;
}

std::vector<int> DeviceMesh::group_ranks(const std::vector<int>& dims) const {
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] < 0 || dims[i] >= kDims || (i > 0 && dims[i] <= dims[i - 1])) {
      throw std::invalid_argument("device mesh: dims must be distinct, outermost first, each 0 to 4; got dim " +
                                  std::to_string(dims[i]) + " at position " + std::to_string(i + 1));
    }
  }
  // Walk the chosen dims as one odometer, the others fixed at this rank's;
  // the innermost dim turning fastest gives the ranks in ascending order.
  std::vector<int> ranks;
  std::array<int, kDims> coords = coords_;
  for (int d : dims) coords[d] = 0;
  while (true) {
    ranks.push_back(rank_of(coords));
    int k = static_cast<int>(dims.size()) - 1;
    while (k >= 0 && ++coords[dims[k]] == sizes_[dims[k]]) coords[dims[k--]] = 0;
    if (k < 0) break;
  }
  return ranks;
}

int DeviceMesh::local_rank(const std::vector<int>& dims) const {
  const std::vector<int> ranks = group_ranks(dims);
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), rank_) - ranks.begin());
}

std::vector<int> DeviceMesh::ep_ranks() const {
  const std::vector<int> shard_cp{dim_index("dp_shard"), dim_index("cp")};
  const std::vector<int> ranks = group_ranks(shard_cp);
  const int first = local_rank(shard_cp) / ep_ * ep_;
  return std::vector<int>(ranks.begin() + first, ranks.begin() + first + ep_);
}

}  // namespace accel
