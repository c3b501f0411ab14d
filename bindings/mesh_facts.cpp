// accel_mesh_facts(): the device mesh that `accel-run env` shows for the
// launch's sizes and world size (engine/launch/env_command.cpp), computed by
// the engine's own mesh arithmetic (engine/parallel/device_mesh.h), which
// the launcher, having no engine, cannot link.
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/parallel/device_mesh.h"

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

// acc.mesh's flattened dims (lua/accel/parallel/device_mesh.lua), by the
// names of the engine mesh's dims.
const std::pair<const char*, std::vector<const char*>> kFlattened[] = {
    {"dp", {"dp_replicate", "dp_shard"}}, {"dp_cp", {"dp_replicate", "dp_shard", "cp"}},
    {"dp_shard_cp", {"dp_shard", "cp"}}};

}  // namespace

// "name\tgroups" lines, one per dim (pp, dp_replicate, dp_shard, cp, tp), per
// flattened dim acc.mesh has (dp: dp_replicate x dp_shard, the loaders'; dp_cp:
// dp x cp, over which gradients are averaged; dp_shard_cp: dp_shard x cp,
// FSDP's shard group) and ep's (borrowed from dp_shard x cp), or one
// "error\tmessage" line when the sizes do not make a mesh of `world_size` ranks.
extern "C" __attribute__((visibility("default"))) const char* accel_mesh_facts(int dp_replicate, int dp_shard, int cp,
                                                                               int tp, int pp, int ep, int world_size) {
  static std::string text;
  const accel::ParallelDims sizes{dp_replicate, dp_shard, cp, tp, pp, ep};
  auto along = [&](std::vector<int> dims) {
    return groups_text(world_size, [&](int rank) { return accel::DeviceMesh(sizes, world_size, rank).group_ranks(dims); });
  };
  try {
    sizes.check(world_size);
    std::ostringstream out;
    const auto& names = accel::DeviceMesh::dim_names();
    for (int d = 0; d < accel::DeviceMesh::kDims; ++d) out << names[d] << '\t' << along({d}) << '\n';
    for (const auto& [name, dim_names] : kFlattened) {
      std::vector<int> dims;
      for (const char* dim : dim_names) dims.push_back(accel::DeviceMesh::dim_index(dim));
      out << name << '\t' << along(dims) << '\n';
    }
    out << "ep\t"
        << groups_text(world_size, [&](int rank) { return accel::DeviceMesh(sizes, world_size, rank).ep_ranks(); })
        << '\n';
    text = out.str();
  } catch (const std::exception& error) {
    text = std::string("error\t") + error.what() + '\n';
  }
  return text.c_str();
}
