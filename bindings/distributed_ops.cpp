// accel.core.dist: the process state and collectives a recipe's Accelerator
// uses. The communicator is created on first use and owned by the Lua state,
// so it is torn down when the state closes.
#include "bindings/distributed_ops.h"

#include <memory>

#include "bindings/lua_support.h"
#include "engine/communicator.h"
#include "engine/gradient_sync.h"
#include "engine/process_state.h"

namespace accel::lua {
namespace {

struct DistContext {
  ProcessState state;
  CommunicatorOptions options;
  std::shared_ptr<Communicator> comm;
};

// A GradientSync keeps its communicator alive: Lua finalizers run in no
// particular order when the state closes.
struct GradientSyncHandle {
  std::shared_ptr<Communicator> comm;
  GradientSync sync;
};

const char kContextKey = 0;
const char* const kGradientSyncType = "accel.GradientSync";

DistContext& context(lua_State* L) {
  lua_pushlightuserdata(L, const_cast<char*>(&kContextKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* ctx = static_cast<DistContext*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  TORCH_CHECK(ctx, "accel.core.dist is not open");
  return *ctx;
}

Communicator& communicator(lua_State* L) {
  DistContext& ctx = context(L);
  if (!ctx.comm) ctx.comm = make_communicator(ctx.state, ctx.options);
  return *ctx.comm;
}

ReduceOp parse_reduce_op(const std::string& name) {
  if (name == "sum") return ReduceOp::Sum;
  if (name == "mean") return ReduceOp::Average;
  if (name == "max") return ReduceOp::Max;
  if (name == "min") return ReduceOp::Min;
  throw ArgError("reduce op must be 'sum', 'mean', 'max' or 'min', got '" + name + "'");
}

at::Tensor& contiguous_in_place(at::Tensor& t, const char* op) {
  TORCH_CHECK(t.is_contiguous(), op, " needs a contiguous tensor; call :contiguous() first");
  return t;
}

int context_gc(lua_State* L) {
  static_cast<DistContext*>(lua_touserdata(L, 1))->~DistContext();
  return 0;
}

int gradient_sync_gc(lua_State* L) {
  static_cast<GradientSyncHandle*>(lua_touserdata(L, 1))->~GradientSyncHandle();
  return 0;
}

GradientSyncHandle& gradient_sync_at(lua_State* L, int idx) {
  auto* handle = static_cast<GradientSyncHandle*>(luaL_testudata(L, idx, kGradientSyncType));
  if (!handle) throw ArgError("expected a GradientSync");
  return *handle;
}

std::vector<Binding> dist_bindings() {
  return {
      bind("state", [](lua_State* L) {
        const ProcessState& s = context(L).state;
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, s.rank);
        lua_setfield(L, -2, "rank");
        lua_pushinteger(L, s.local_rank);
        lua_setfield(L, -2, "local_rank");
        lua_pushinteger(L, s.world_size);
        lua_setfield(L, -2, "world_size");
        lua_pushinteger(L, s.local_world_size);
        lua_setfield(L, -2, "local_world_size");
        return Pushed{1};
      }),
      // Joins the process group now (it is joined lazily otherwise).
      bind("init", [](lua_State* L) { communicator(L); }),
      bind("backend", [](lua_State* L) { return communicator(L).backend(); }),
      bind("all_reduce", [](lua_State* L, at::Tensor t, c10::optional<std::string> op) {
        communicator(L).all_reduce(contiguous_in_place(t, "all_reduce"),
                                   parse_reduce_op(op.value_or("sum")));
        return t;
      }),
      bind("broadcast", [](lua_State* L, at::Tensor t, int64_t root) {
        at::NoGradGuard no_grad;  // parameters are overwritten in place
        communicator(L).broadcast(contiguous_in_place(t, "broadcast"), static_cast<int>(root));
        return t;
      }),
      bind("all_gather", [](lua_State* L, const at::Tensor& t) {
        return communicator(L).all_gather(t);
      }),
      bind("barrier", [](lua_State* L) { communicator(L).barrier(); }),
      // Run by the worker after the recipe: no rank may exit while a peer
      // still needs it, even only to finish joining the group.
      bind("finish", [](lua_State* L) {
        const std::shared_ptr<Communicator>& comm = context(L).comm;
        if (comm && comm->size() > 1) comm->barrier();
      }),
      bind("counts", [](lua_State* L) {
        const CollectiveCounts& c = communicator(L).counts();
        lua_createtable(L, 0, 4);
        lua_pushnumber(L, static_cast<lua_Number>(c.all_reduce));
        lua_setfield(L, -2, "all_reduce");
        lua_pushnumber(L, static_cast<lua_Number>(c.broadcast));
        lua_setfield(L, -2, "broadcast");
        lua_pushnumber(L, static_cast<lua_Number>(c.all_gather));
        lua_setfield(L, -2, "all_gather");
        lua_pushnumber(L, static_cast<lua_Number>(c.barrier));
        lua_setfield(L, -2, "barrier");
        return Pushed{1};
      }),
      // GradientSync(params, bucket_bytes): averages these parameters' grads.
      bind("GradientSync", [](lua_State* L, TensorList params, c10::optional<int64_t> bucket_bytes) {
        Communicator& comm = communicator(L);
        void* memory = lua_newuserdata(L, sizeof(GradientSyncHandle));
        new (memory) GradientSyncHandle{
            context(L).comm,
            GradientSync(comm, params.value, bucket_bytes.value_or(GradientSync::kDefaultBucketBytes))};
        luaL_getmetatable(L, kGradientSyncType);
        lua_setmetatable(L, -2);
        return Pushed{1};
      }),
  };
}

std::vector<Binding> gradient_sync_methods() {
  return {
      bind("synchronize", [](lua_State* L, Receiver) { gradient_sync_at(L, 1).sync.synchronize(); }),
      bind("num_buckets", [](lua_State* L, Receiver) { return gradient_sync_at(L, 1).sync.num_buckets(); }),
  };
}

}  // namespace

void open_distributed(lua_State* L, const CommunicatorOptions& options) {
  lua_pushlightuserdata(L, const_cast<char*>(&kContextKey));
  void* memory = lua_newuserdata(L, sizeof(DistContext));
  new (memory) DistContext{ProcessState::from_environment(), options, nullptr};
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, context_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);

  luaL_newmetatable(L, kGradientSyncType);
  lua_newtable(L);
  register_bindings(L, -1, "GradientSync:", gradient_sync_methods());
  lua_setfield(L, -2, "__index");
  lua_pushcfunction(L, gradient_sync_gc);
  lua_setfield(L, -2, "__gc");
  lua_pop(L, 1);

  lua_newtable(L);
  register_bindings(L, -1, "accel.dist.", dist_bindings());
}

}  // namespace accel::lua
