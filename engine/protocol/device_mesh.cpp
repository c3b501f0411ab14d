#include "engine/protocol/device_mesh.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace accel {
namespace {

// Each group `ranks_of(rank)` gives, in order of its first rank:
// "{0, 1} {2, 3}"; past kShown groups, how many more.
template <class RanksOf>
std::string groups_text(int world_size, RanksOf ranks_of) {
  constexpr int kShown = 8;
  std::ostringstream out;
  int groups = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::vector<int> ranks = ranks_of(rank);
    if (ranks.front() != rank) continue;  // listed with its first rank
    if (++groups > kShown) continue;
    out << (groups > 1 ? " {" : "{");
    for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
    out << '}';
  }
  if (groups > kShown) out << " ... (" << groups << " groups)";
  return out.str();
}

// The groups along `dims` (flattened).
std::string groups_text(const ParallelDims& sizes, int world_size, const std::vector<int>& dims) {
  return groups_text(world_size, [&](int rank) { return DeviceMesh(sizes, world_size, rank).group_ranks(dims); });
}

}  // namespace

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

const std::vector<DeviceMesh::FlattenedDim>& DeviceMesh::flattened_dims() {
  static const std::vector<FlattenedDim> dims{
      {"dp", {dim_index("dp_replicate"), dim_index("dp_shard")}},
      {"dp_cp", {dim_index("dp_replicate"), dim_index("dp_shard"), dim_index("cp")}},
      {"dp_shard_cp", {dim_index("dp_shard"), dim_index("cp")}}};
  return dims;
}

std::vector<std::pair<std::string, std::string>> mesh_group_rows(const ParallelDims& sizes, int world_size) {
  sizes.check(world_size);
  std::vector<std::pair<std::string, std::string>> rows;
  const auto& names = DeviceMesh::dim_names();
  for (int d = 0; d < DeviceMesh::kDims; ++d) rows.emplace_back(names[d], groups_text(sizes, world_size, {d}));
  for (const auto& [name, dims] : DeviceMesh::flattened_dims()) {
    rows.emplace_back(name, groups_text(sizes, world_size, dims));
  }
  rows.emplace_back("ep", groups_text(world_size, [&](int rank) { return DeviceMesh(sizes, world_size, rank).ep_ranks(); }));
  return rows;
}

}  // namespace accel
