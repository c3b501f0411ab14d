// The device mesh's arithmetic (engine/protocol/device_mesh.h): sizes
// checked once with errors naming every size and the world size, tp
// innermost, and the groups along one dim or several flattened.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/protocol/device_mesh.h"

using accel::DeviceMesh;
using accel::ParallelDims;

namespace {

std::string error_of(const ParallelDims& dims, int world_size) {
  try {
    dims.check(world_size);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

const int kTp = DeviceMesh::dim_index("tp");
const int kCp = DeviceMesh::dim_index("cp");
const int kShard = DeviceMesh::dim_index("dp_shard");
const int kReplicate = DeviceMesh::dim_index("dp_replicate");
const int kPp = DeviceMesh::dim_index("pp");

}  // namespace

TEST_CASE("ParallelDims refuses sizes whose product is not the world, naming them") {
  const std::string message = error_of(ParallelDims{2, 1, 1, 2}, 8);
  CHECK(message.find("multiply to 4") != std::string::npos);
  CHECK(message.find("dp_replicate_size = 2, dp_shard_size = 1, cp_size = 1, tp_size = 2") != std::string::npos);
  CHECK(message.find("world has 8 ranks") != std::string::npos);
  CHECK(error_of(ParallelDims{2, 2, 1, 2}, 8).empty());
}

TEST_CASE("ParallelDims refuses sizes below one") {
  const std::string message = error_of(ParallelDims{1, 1, 0, 4}, 4);
  CHECK(message.find("positive integer") != std::string::npos);
  CHECK(message.find("cp_size = 0") != std::string::npos);
  // Two negative sizes multiply to the world: still refused.
  CHECK(error_of(ParallelDims{-1, 1, 1, -4}, 4).find("positive integer") != std::string::npos);
}

TEST_CASE("DeviceMesh puts tp innermost, then cp, dp_shard, dp_replicate") {
  // 16 ranks: dp_replicate 2 x dp_shard 2 x cp 2 x tp 2. Rank 13 = 1101b.
  const DeviceMesh mesh(ParallelDims{2, 2, 2, 2}, 16, 13);
  CHECK(mesh.coordinate(kReplicate) == 1);
  CHECK(mesh.coordinate(kShard) == 1);
  CHECK(mesh.coordinate(kCp) == 0);
  CHECK(mesh.coordinate(kTp) == 1);
  CHECK(mesh.group_ranks({kTp}) == std::vector<int>{12, 13});
  CHECK(mesh.group_ranks({kCp}) == std::vector<int>{13, 15});
  CHECK(mesh.group_ranks({kShard}) == std::vector<int>{9, 13});
  CHECK(mesh.group_ranks({kReplicate}) == std::vector<int>{5, 13});
  CHECK(mesh.local_rank({kTp}) == 1);
  CHECK(mesh.local_rank({kReplicate}) == 1);
  // Flattened: the data-parallel ranks (dp_replicate x dp_shard), and dp_shard x cp.
  CHECK(mesh.group_ranks({kReplicate, kShard}) == std::vector<int>{1, 5, 9, 13});
  CHECK(mesh.local_rank({kReplicate, kShard}) == 3);
  CHECK(mesh.group_ranks({kShard, kCp}) == std::vector<int>{9, 11, 13, 15});
}

TEST_CASE("DeviceMesh groups partition the world along each dim") {
  const ParallelDims dims{1, 3, 1, 2};
  for (int dim = 0; dim < DeviceMesh::kDims; ++dim) {
    std::vector<int> seen(6, 0);
    for (int rank = 0; rank < 6; ++rank) {
      const DeviceMesh mesh(dims, 6, rank);
      const std::vector<int> group = mesh.group_ranks({dim});
      CHECK(static_cast<int>(group.size()) == mesh.size(dim));
      CHECK(group[mesh.local_rank({dim})] == rank);
      if (mesh.local_rank({dim}) == 0) {
        for (int r : group) ++seen[r];
      }
    }
    CHECK(seen == std::vector<int>(6, 1));
  }
}

TEST_CASE("DeviceMesh names unknown dims and ranks outside the world") {
  CHECK_THROWS_WITH(DeviceMesh::dim_index("ep"), Catch::Contains("no dim 'ep'") && Catch::Contains("pp, dp_replicate"));
  CHECK_THROWS_WITH(DeviceMesh(ParallelDims{1, 1, 1, 2}, 2, 2), Catch::Contains("rank 2 is not in a world of 2"));
  const DeviceMesh mesh(ParallelDims{1, 1, 1, 2}, 2, 0);
  CHECK_THROWS_WITH(mesh.group_ranks({kTp, kCp}), Catch::Contains("outermost first"));
}

TEST_CASE("the mesh's group rows are every dim's and every flattened dim's groups") {
  using Rows = std::vector<std::pair<std::string, std::string>>;
  CHECK(accel::mesh_group_rows(ParallelDims{2, 2, 2, 1}, 8) ==
        Rows{{"pp", "{0} {1} {2} {3} {4} {5} {6} {7}"},
             {"dp_replicate", "{0, 4} {1, 5} {2, 6} {3, 7}"},
             {"dp_shard", "{0, 2} {1, 3} {4, 6} {5, 7}"},
             {"cp", "{0, 1} {2, 3} {4, 5} {6, 7}"},
             {"tp", "{0} {1} {2} {3} {4} {5} {6} {7}"},
             {"dp", "{0, 2, 4, 6} {1, 3, 5, 7}"},
             {"dp_cp", "{0, 1, 2, 3, 4, 5, 6, 7}"},
             {"dp_shard_cp", "{0, 1, 2, 3} {4, 5, 6, 7}"},
             {"ep", "{0} {1} {2} {3} {4} {5} {6} {7}"}});
  // Past 8 groups, how many there are.
  CHECK(accel::mesh_group_rows(ParallelDims{1, 1, 1, 1}, 1).back().second == "{0}");
  CHECK(accel::mesh_group_rows(ParallelDims{10, 1, 1, 1}, 10)[4].second ==
        "{0} {1} {2} {3} {4} {5} {6} {7} ... (10 groups)");
  CHECK_THROWS_AS(accel::mesh_group_rows(ParallelDims{1, 1, 1, 2}, 3), std::invalid_argument);
}

TEST_CASE("DeviceMesh puts pp outermost, as torchtitan") {
  // 8 ranks: pp 2 x dp_shard 2 x tp 2 (dp_replicate, dp_shard, cp, tp, pp, ep).
  const DeviceMesh mesh(ParallelDims{1, 2, 1, 2, 2, 1}, 8, 5);
  CHECK(kPp == 0);
  CHECK(mesh.coordinate(kPp) == 1);
  CHECK(mesh.group_ranks({kPp}) == std::vector<int>{1, 5});
  CHECK(mesh.group_ranks({kTp}) == std::vector<int>{4, 5});
  // The data-parallel ranks are those of one stage.
  CHECK(mesh.group_ranks({kReplicate, kShard}) == std::vector<int>{5, 7});
}

TEST_CASE("DeviceMesh's ep groups borrow consecutive ranks of dp_shard x cp") {
  // 8 ranks: dp_shard 4 x cp 2, ep 4: the dp_shard x cp group is all 8 ranks.
  const ParallelDims dims{1, 4, 2, 1, 1, 4};
  CHECK(DeviceMesh(dims, 8, 0).ep_ranks() == std::vector<int>{0, 1, 2, 3});
  CHECK(DeviceMesh(dims, 8, 6).ep_ranks() == std::vector<int>{4, 5, 6, 7});
  // With tp 2 the dp_shard x cp group of rank 3 is {1, 3, 5, 7}; ep 2 cuts it in two.
  const ParallelDims with_tp{1, 4, 1, 2, 1, 2};
  CHECK(DeviceMesh(with_tp, 8, 3).ep_ranks() == std::vector<int>{1, 3});
  CHECK(DeviceMesh(with_tp, 8, 5).ep_ranks() == std::vector<int>{5, 7});
  CHECK(DeviceMesh(ParallelDims{2, 1, 1, 1}, 2, 1).ep_ranks() == std::vector<int>{1});
}

TEST_CASE("ParallelDims counts pp in the product and refuses an ep that does not divide dp_shard x cp") {
  const std::string product = error_of(ParallelDims{1, 2, 1, 1, 2, 1}, 8);
  CHECK(product.find("multiply to 4") != std::string::npos);
  CHECK(product.find("pp_size = 2, dp_replicate_size = 1, dp_shard_size = 2") != std::string::npos);
  CHECK(error_of(ParallelDims{1, 2, 1, 1, 4, 1}, 8).empty());
  const std::string ep = error_of(ParallelDims{2, 3, 1, 1, 1, 2}, 6);
  CHECK(ep.find("ep_size = 2 must divide dp_shard_size x cp_size = 3") != std::string::npos);
  CHECK(error_of(ParallelDims{1, 1, 1, 1, 1, 0}, 1).find("ep_size = 0") != std::string::npos);
}
