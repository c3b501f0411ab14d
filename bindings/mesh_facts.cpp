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

// Each group along `dims` (flattened), in order of its first rank:
// "{0, 1} {2, 3}"; past kShown groups, how many more.
std::string groups_text(const accel::ParallelDims& sizes, int world_size, const std::vector<int>& dims) {
  constexpr int kShown = 8;
  std::ostringstream out;
  int groups = 0;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::vector<int> ranks = accel::DeviceMesh(sizes, world_size, rank).group_ranks(dims);
    if (ranks.front() != rank) continue;  // listed with its first rank
    if (++groups > kShown) continue;
    out << (groups > 1 ? " {" : "{");
    for (size_t i = 0; i < ranks.size(); ++i) out << (i ? ", " : "") << ranks[i];
    out << '}';
  }
  if (groups > kShown) out << " ... (" << groups << " groups)";
  return out.str();
}

// acc.mesh's flattened dims (lua/accel/parallel/device_mesh.lua), as dims of
// the engine's mesh: dp_replicate 0, dp_shard 1, cp 2, tp 3.
const std::pair<const char*, std::vector<int>> kFlattened[] = {
    {"dp", {0, 1}}, {"dp_cp", {0, 1, 2}}, {"dp_shard_cp", {1, 2}}};

}  // namespace

// "name\tgroups" lines, one per dim (dp_replicate, dp_shard, cp, tp) and per
// flattened dim acc.mesh has (dp: dp_replicate x dp_shard, the loaders'; dp_cp:
// dp x cp, over which gradients are averaged; dp_shard_cp: dp_shard x cp,
// FSDP's shard group), or one "error\tmessage" line when the sizes do not
// make a mesh of `world_size` ranks.
extern "C" __attribute__((visibility("default"))) const char* accel_mesh_facts(int dp_replicate, int dp_shard, int cp,
                                                                               int tp, int world_size) {
  static std::string text;
  const accel::ParallelDims sizes{dp_replicate, dp_shard, cp, tp};
  try {
    sizes.check(world_size);
    std::ostringstream out;
    const auto& names = accel::DeviceMesh::dim_names();
    for (int d = 0; d < accel::DeviceMesh::kDims; ++d) out << names[d] << '\t' << groups_text(sizes, world_size, {d}) << '\n';
    for (const auto& [name, dims] : kFlattened) out << name << '\t' << groups_text(sizes, world_size, dims) << '\n';
    text = out.str();
  } catch (const std::exception& error) {
    text = std::string("error\t") + error.what() + '\n';
  }
  return text.c_str();
}
