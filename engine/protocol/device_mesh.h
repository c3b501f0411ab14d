// The ranks of a run as a device mesh with the named dims pp, dp_replicate,
// dp_shard, cp and tp, in that order, pp outermost and tp innermost
// (torchtitan's ParallelDims and its mesh):
// rank = (((p * dp_replicate + r) * dp_shard + s) * cp + c) * tp + t.
// Expert parallelism adds no dim: its ranks are borrowed from dp_shard x cp
// (as torchtitan's), each ep group ep consecutive ranks of a dp_shard x cp
// group, so experts are split where FSDP would replicate them.
// So the ranks of one tp group are neighbours (on one machine, when a
// machine holds a multiple of tp ranks), as Megatron places them.
//
// Pure arithmetic, no communication and no LibTorch (so it is protocol's:
// the workers and `accel-run env` share it): which ranks share a group with
// this one along a dim, or along several dims flattened (the data-parallel
// "dp" is dp_replicate x dp_shard). The groups' collectives are
// make_group_communicator's (engine/comm/group_communicator.h).
#pragma once
#include <array>
#include <string>
#include <utility>
#include <vector>

namespace accel {

// The sizes of accel.ParallelismConfig, checked in one place: each a
// positive integer, the product of all but ep the world size, ep dividing
// dp_shard x cp.
struct ParallelDims {
  int dp_replicate = 1;
  int dp_shard = 1;
  int cp = 1;
  int tp = 1;
  int pp = 1;
  int ep = 1;

  // Throws std::invalid_argument naming every size and the world size
  // when a size is below 1, the product is not world_size or ep does not
  // divide dp_shard x cp.
  void check(int world_size) const;
  // "pp_size = 1, dp_replicate_size = 1, dp_shard_size = 1, cp_size = 1, tp_size = 2, ep_size = 1"
  std::string describe() const;
};

class DeviceMesh {
 public:
  static constexpr int kDims = 5;
  // The dims, outermost first.
  static const std::array<const char*, kDims>& dim_names();

  // Checks `dims` against `world_size` (ParallelDims::check) and `rank`.
  DeviceMesh(const ParallelDims& dims, int world_size, int rank);

  // Index of a dim by name; throws std::invalid_argument naming the dims for
  // an unknown one.
  static int dim_index(const std::string& name);
  int size(int dim) const { return sizes_[dim]; }
  // This rank's coordinate along `dim`, 0-based.
  int coordinate(int dim) const { return coords_[dim]; }
  // The global ranks, ascending, that differ from this one only along the
  // dims given (distinct, outermost first): its group over those dims
  // flattened. This rank's place in that list is its local rank there.
  std::vector<int> group_ranks(const std::vector<int>& dims) const;
  int local_rank(const std::vector<int>& dims) const;
  // This rank's expert-parallel group: the ep consecutive ranks of its
  // dp_shard x cp group that hold it.
  std::vector<int> ep_ranks() const;

  // The flattened dims acc.mesh has (lua/accel/parallel/device_mesh.lua),
  // outermost first: dp (dp_replicate x dp_shard, the loaders'), dp_cp (dp x
  // cp, over which gradients are averaged) and dp_shard_cp (dp_shard x cp,
  // FSDP's shard group).
  struct FlattenedDim {
    const char* name;
    std::vector<int> dims;
  };
  static const std::vector<FlattenedDim>& flattened_dims();

 private:
  int rank_of(const std::array<int, kDims>& coords) const;

  std::array<int, kDims> sizes_;
  std::array<int, kDims> coords_;
  int ep_;
  int rank_;
};

// "name\tgroups" rows, one per dim (pp, dp_replicate, dp_shard, cp, tp), per
// flattened dim and ep's (borrowed from dp_shard x cp), each group "{0, 1}" in order of its first rank, past 8
// groups how many more: what `accel-run env` shows. Throws
// std::invalid_argument (ParallelDims::check) when the sizes do not make a
// mesh of `world_size` ranks.
std::vector<std::pair<std::string, std::string>> mesh_group_rows(const ParallelDims& sizes, int world_size);

}  // namespace accel
