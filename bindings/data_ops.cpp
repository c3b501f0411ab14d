// accel.core.data: what the Lua DataLoader needs from the engine: each
// rank's sample indices for an epoch, and gathering a batch's rows.
// Indices here are the engine's own (0-based) and never reach recipes.
#include "bindings/op_tables.h"
#include "engine/distributed_sampler.h"

namespace accel::lua {

std::vector<Binding> data_bindings() {
  return {
      // shard(n, world_size, rank, shuffle, seed, epoch, drop_last)
      //   -> indices (0-based int64), num_padding, total_size
      bind("shard", [](int64_t n, int64_t world, int64_t rank, bool shuffle, int64_t seed,
                       int64_t epoch, bool drop_last) {
        DistributedSampler sampler(n, world, rank, shuffle, seed, drop_last);
        sampler.set_epoch(epoch);
        RankShard shard = sampler.shard();
        return std::make_tuple(shard.indices, shard.num_padding, shard.total_size);
      }),
      // take_rows({t1, t2, ...}, indices) -> t1[indices], t2[indices], ...
      bind("take_rows", [](TensorList tensors, const at::Tensor& indices) {
        std::vector<at::Tensor> rows;
        rows.reserve(tensors.value.size());
        for (const at::Tensor& t : tensors.value) rows.push_back(t.index_select(0, indices));
        return rows;
      }),
  };
}

}  // namespace accel::lua
