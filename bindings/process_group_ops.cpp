// accel.core.dist.device_mesh and new_group: the device mesh's arithmetic
// (engine/protocol/device_mesh.h) and the collectives of a group of ranks
// (engine/comm/group_communicator.h) as the handle accel.ProcessGroup, with
// tensor parallelism's autograd operators over it
// (engine/parallel/tensor_parallel_ops.h) and context parallelism's ring
// (engine/parallel/ring_attention.h), and point-to-point send/recv of whole
// tensors (engine/comm/tensor_exchange.h) with their pending transfers as
// accel.Work. lua/accel/parallel/ builds acc.mesh, the tensor- and
// context-parallel layers and the pipeline's stages on them.
#include <ATen/ATen.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "bindings/distributed_ops.h"
#include "bindings/lua_support.h"
#include "bindings/option_table.h"
#include "bindings/tensor_handle.h"
#include "bindings/typed_userdata.h"
#include "engine/comm/communicator.h"
#include "engine/comm/group_communicator.h"
#include "engine/comm/reduce_op.h"
#include "engine/comm/tensor_exchange.h"
#include "engine/protocol/device_mesh.h"
#include "engine/parallel/expert_exchange.h"
#include "engine/parallel/gradient_reducer.h"
#include "engine/parallel/ring_attention.h"
#include "engine/parallel/ring_shift.h"
#include "engine/parallel/tensor_parallel_ops.h"
#include "engine/process_state.h"

namespace accel::lua {
namespace {

struct GroupHandle {
  std::shared_ptr<Communicator> comm;
  std::vector<int> ranks;  // global ranks, ascending
  std::string name;
  std::shared_ptr<TensorExchange> exchange;  // made at the first send or recv

  TensorExchange& tensors() {
    if (!exchange) exchange = std::make_shared<TensorExchange>(comm, name, ranks);
    return *exchange;
  }
};

// A send or receive in flight (torch.distributed's Work): wait() completes
// it and hands over the tensor sent or received; the Work then holds
// neither the tensor nor the transfer, so their memory goes with the
// caller's last reference, not with the collection of the Work (a
// pipeline's stages let go of each activation as soon as its transfer is
// done). A second wait() returns nothing.
struct WorkHandle {
  std::shared_ptr<PendingOp> send;
  at::Tensor sent;
  std::shared_ptr<TensorExchange::Receive> receive;
};

std::vector<Binding> group_methods();
const HandleType kGroup{"accel.ProcessGroup", "ProcessGroup:", group_methods};
std::vector<Binding> work_methods();
const HandleType kWork{"accel.Work", "Work:", work_methods};

std::vector<Binding> work_methods() {
  return {
      bind("wait", [](lua_State* L, Receiver) {
        WorkHandle& work = check_handle<WorkHandle>(L, 1, kWork);
        if (work.receive) {
          at::Tensor t = work.receive->wait();
          work.receive.reset();
          t.unsafeGetTensorImpl()->bump_version();
          push_tensor(L, std::move(t));
        } else if (work.send) {
          work.send->wait();
          work.send.reset();
          push_tensor(L, std::exchange(work.sent, at::Tensor()));
        } else {
          lua_pushnil(L);
        }
        return Pushed{1};
      }),
  };
}

GroupHandle& group_at(lua_State* L) {
  auto* handle = test_handle<GroupHandle>(L, 1, kGroup);
  if (!handle) throw ArgError("expected a ProcessGroup as argument 1 (use g:method(...))");
  return *handle;
}

ReduceOp reduce_op(const c10::optional<std::string>& name) {
  if (std::optional<ReduceOp> op = reduce_op_from_name(name.value_or("sum"))) return *op;
  throw ArgError("reduce op must be 'sum', 'mean', 'max' or 'min', got '" + *name + "'");
}

std::optional<at::Tensor> into_optional(const c10::optional<at::Tensor>& t) {
  return t ? std::optional<at::Tensor>(*t) : std::nullopt;
}

// Where a receive that leaves the shape to the sender makes its tensor.
at::Device receive_device(const c10::optional<std::string>& name, const char* what) {
  return name ? usable_device(*name, what) : at::Device(at::kCPU);
}

void push_int_list(lua_State* L, const std::vector<int>& values) {
  lua_createtable(L, static_cast<int>(values.size()), 0);
  for (size_t i = 0; i < values.size(); ++i) {
    lua_pushinteger(L, values[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// {size, rank, ranks} of a group of global ranks holding `rank`.
void push_group_place(lua_State* L, const std::vector<int>& ranks, int rank) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, static_cast<lua_Integer>(ranks.size()));
  lua_setfield(L, -2, "size");
  lua_pushinteger(L, static_cast<lua_Integer>(std::find(ranks.begin(), ranks.end(), rank) - ranks.begin()));
  lua_setfield(L, -2, "rank");
  push_int_list(L, ranks);
  lua_setfield(L, -2, "ranks");
}

// This rank's group over `dims`.
void push_mesh_dim(lua_State* L, const DeviceMesh& mesh, const std::vector<int>& dims, int rank) {
  push_group_place(L, mesh.group_ranks(dims), rank);
}

std::vector<Binding> group_methods() {
  return {
      bind("rank", [](lua_State* L, Receiver) { return static_cast<int64_t>(group_at(L).comm->rank()); }),
      bind("size", [](lua_State* L, Receiver) { return static_cast<int64_t>(group_at(L).comm->size()); }),
      // backend(): "gloo", "nccl", "mpi", or "none" for a group of one rank.
      bind("backend", [](lua_State* L, Receiver) { return group_at(L).comm->backend(); }),
      bind("ranks", [](lua_State* L, Receiver) {
        push_int_list(L, group_at(L).ranks);
        return Pushed{1};
      }),
      // In place, over the group's ranks; returns `t`.
      bind("all_reduce", [](lua_State* L, Receiver, at::Tensor t, c10::optional<std::string> op) {
        TORCH_CHECK(t.is_contiguous(), "all_reduce needs a contiguous tensor; call :contiguous() first");
        at::NoGradGuard no_grad;
        group_at(L).comm->all_reduce(t, reduce_op(op));
        return t;
      }),
      // Every group rank's `t`, in group rank order.
      bind("all_gather", [](lua_State* L, Receiver, const at::Tensor& t) {
        return group_at(L).comm->all_gather(t.contiguous());
      }),
      // reduce_scatter(output, input[, op]), flat as Communicator::reduce_scatter; returns `output`.
      bind("reduce_scatter", [](lua_State* L, Receiver, at::Tensor output, at::Tensor input,
                                c10::optional<std::string> op) {
        at::NoGradGuard no_grad;
        group_at(L).comm->reduce_scatter(output, input, reduce_op(op));
        return output;
      }),
      // broadcast(t, root): root is a rank of the group (0-based), not a global rank.
      bind("broadcast", [](lua_State* L, Receiver, at::Tensor t, int64_t root) {
        TORCH_CHECK(t.is_contiguous(), "broadcast needs a contiguous tensor");
        at::NoGradGuard no_grad;
        group_at(L).comm->broadcast(t, static_cast<int>(root));
        t.unsafeGetTensorImpl()->bump_version();
        return t;
      }),
      bind("barrier", [](lua_State* L, Receiver) { group_at(L).comm->barrier(); }),
      // {all_reduce, all_reduce_shared_memory, ...}: the group's collectives so far.
      bind("counts", [](lua_State* L, Receiver) { return push_collective_counts(L, group_at(L).comm->counts()); }),
      bind("copy_to", [](lua_State* L, Receiver, const at::Tensor& x) { return copy_to_group(x, group_at(L).comm); }),
      bind("reduce_from", [](lua_State* L, Receiver, const at::Tensor& x) {
        return reduce_from_group(x, group_at(L).comm);
      }),
      bind("gather_from", [](lua_State* L, Receiver, const at::Tensor& x) {
        return gather_from_group(x, group_at(L).comm);
      }),
      // Sequence parallelism's pair: x gathered along dim from every group rank (backward
      // reduce-scatter), and the group's sum of x, this rank's part along dim (backward all-gather).
      bind("gather_sequence", [](lua_State* L, Receiver, const at::Tensor& x, Dim dim) {
        return gather_sequence(x, dim.value, group_at(L).comm);
      }),
      bind("reduce_scatter_sequence", [](lua_State* L, Receiver, const at::Tensor& x, Dim dim) {
        return reduce_scatter_sequence(x, dim.value, group_at(L).comm);
      }),
      // ring_shift(x): the previous group rank's x; its gradient goes back (engine/parallel/ring_shift.h).
      bind("ring_shift", [](lua_State* L, Receiver, const at::Tensor& x) { return ring_shift(x, group_at(L).comm); }),
      // ring_attention(q, k, v[, {causal = true, scale, position_ids}]): attention over the sequence the
      // group's ranks hold between them, causal in the load-balanced layout, within each packed document
      // that position_ids mark (engine/parallel/ring_attention.h).
      bind("ring_attention", [](lua_State* L, Receiver, const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v, Options o) {
        check_option_names(L, o, {"causal", "scale", "position_ids"});
        RingAttentionOptions options;
        options.causal = option_boolean(L, o, "causal", true);
        if (option_present(L, o, "scale")) options.scale = option_number(L, o, "scale", 0.0);
        if (option_present(L, o, "position_ids")) options.position_ids = *option_tensor(L, o, "position_ids");
        return ring_attention(q, k, v, group_at(L).comm, options);
      }),
      // all_to_all(x, counts): expert parallelism's exchange (engine/parallel/expert_exchange.h): x's rows
      // sent to the group's ranks as counts (int64 [ranks, parts], the same shape on every rank) says;
      // returns the rows every rank sent here, in rank order, and their counts [ranks, parts]. Its backward
      // sends the rows' gradients back.
      bind("all_to_all", [](lua_State* L, Receiver, const at::Tensor& x, const at::Tensor& counts) {
        GroupHandle& group = group_at(L);
        at::Tensor received = exchange_counts(counts, *group.comm);
        push_tensor(L, exchange_rows(x, counts, received, group.comm));
        push_tensor(L, received);
        return Pushed{2};
      }),
      // send(t, dst) / recv(t, src): blocking, dst and src ranks of the group (0-based); recv(nil, src[,
      // device]) makes a tensor of the sender's dtype and shape (on the CPU unless a device is named),
      // recv(t, src) fills t (a mismatch is an error naming both). isend / irecv return an accel.Work at once, whose wait() returns the tensor.
      bind("send", [](lua_State* L, Receiver, const at::Tensor& t, int64_t dst) {
        group_at(L).tensors().send(t, static_cast<int>(dst));
      }),
      bind("recv", [](lua_State* L, Receiver, c10::optional<at::Tensor> into, int64_t src,
                      c10::optional<std::string> device) {
        at::NoGradGuard no_grad;
        at::Tensor t = group_at(L).tensors().recv(static_cast<int>(src), into_optional(into),
                                                  receive_device(device, "ProcessGroup:recv"));
        t.unsafeGetTensorImpl()->bump_version();
        return t;
      }),
      bind("isend", [](lua_State* L, Receiver, const at::Tensor& t, int64_t dst) {
        std::shared_ptr<PendingOp> op = group_at(L).tensors().isend(t, static_cast<int>(dst));
        push_handle(L, kWork, WorkHandle{std::move(op), t, nullptr});
        return Pushed{1};
      }),
      bind("irecv", [](lua_State* L, Receiver, c10::optional<at::Tensor> into, int64_t src,
                       c10::optional<std::string> device) {
        auto receive = group_at(L).tensors().irecv(static_cast<int>(src), into_optional(into),
                                                   receive_device(device, "ProcessGroup:irecv"));
        push_handle(L, kWork, WorkHandle{nullptr, at::Tensor(), std::move(receive)});
        return Pushed{1};
      }),
      // GradientReducer(params[, bucket_bytes]): averages these gradients over the group's ranks.
      bind("GradientReducer", [](lua_State* L, Receiver, TensorList params, c10::optional<int64_t> bucket_bytes) {
        push_gradient_reducer(L, group_at(L).comm, params.value,
                              bucket_bytes.value_or(GradientReducer::kDefaultBucketBytes));
        return Pushed{1};
      }),
  };
}

}  // namespace

std::shared_ptr<Communicator> group_communicator_arg(lua_State* L, int idx, const char* what) {
  auto* handle = test_handle<GroupHandle>(L, idx, kGroup);
  if (!handle) throw ArgError(std::string(what) + ": expected a ProcessGroup (a mesh dim's .group)");
  return handle->comm;
}

std::vector<Binding> process_group_bindings() {
  return {
      // device_mesh(dp_replicate, dp_shard, cp, tp, pp, ep) -> {pp = {size,
      // rank, ranks}, dp_replicate = ..., dp_shard = ..., cp = ..., tp = ...,
      // dp = ..., dp_cp = ..., dp_shard_cp = ..., ep = ...}: this rank's place
      // along each dim ("dp": dp_replicate x dp_shard flattened, "dp_cp": dp x
      // cp, the ranks a model's gradients are averaged over, "dp_shard_cp":
      // dp_shard x cp, FSDP's shard group, "ep": the ranks of dp_shard_cp that
      // split the experts).
      bind("device_mesh", [](lua_State* L, int64_t dp_replicate, int64_t dp_shard, int64_t cp, int64_t tp, int64_t pp,
                             int64_t ep) {
        const ProcessState& state = dist_process_state(L);
        const ParallelDims dims{static_cast<int>(dp_replicate), static_cast<int>(dp_shard), static_cast<int>(cp),
                                static_cast<int>(tp), static_cast<int>(pp), static_cast<int>(ep)};
        const DeviceMesh mesh(dims, state.world_size, state.rank);
        lua_createtable(L, 0, DeviceMesh::kDims + 4);
        for (int d = 0; d < DeviceMesh::kDims; ++d) {
          push_mesh_dim(L, mesh, {d}, state.rank);
          lua_setfield(L, -2, DeviceMesh::dim_names()[d]);
        }
        for (const auto& [name, flattened] : DeviceMesh::flattened_dims()) {
          push_mesh_dim(L, mesh, flattened, state.rank);
          lua_setfield(L, -2, name);
        }
        push_group_place(L, mesh.ep_ranks(), state.rank);
        lua_setfield(L, -2, "ep");
        return Pushed{1};
      }),
      // new_group(name, ranks): the collectives of these global ranks (0-based,
      // ascending, this rank among them); only members call it.
      bind("new_group", [](lua_State* L, std::string name, IntList ranks) {
        std::vector<int> members(ranks.value.begin(), ranks.value.end());
        auto comm = make_group_communicator(dist_process_state(L), dist_communicator_options(L), name, members);
        push_handle(L, kGroup, GroupHandle{std::shared_ptr<Communicator>(std::move(comm)), members, name, nullptr});
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
