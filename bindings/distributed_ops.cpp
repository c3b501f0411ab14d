// accel.core.dist: the process state and collectives a recipe's Accelerator
// uses. The communicator is created on first use and owned by the Lua state,
// so it is torn down when the state closes, unless it is kept for the next
// state (keep_communicator_between_states).
#include "bindings/distributed_ops.h"

#include <memory>
#include <optional>

#include "bindings/error_log.h"
#include "bindings/gradient_sync_methods.h"
#include "bindings/lua_support.h"
#include "engine/comm/communicator.h"
#include "engine/comm/reduce_op.h"
#include "engine/gpu.h"
#include "engine/parallel/gradient_reducer.h"
#include "engine/process_state.h"

namespace accel::lua {
namespace {

struct DistContext {
  ProcessState state;
  CommunicatorOptions options;
  std::shared_ptr<Communicator> comm;
};

// A reducer keeps its communicator alive: Lua finalizers run in no
// particular order when the state closes.
struct ReducerHandle {
  std::shared_ptr<Communicator> comm;
  std::unique_ptr<GradientReducer> reducer;
};

const char kContextKey = 0;

bool g_keep_communicator = false;
std::shared_ptr<Communicator> g_kept_communicator;

std::vector<Binding> reducer_methods();
const HandleType kReducer{"accel.GradientReducer", "GradientReducer:", reducer_methods};

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
  if (!ctx.comm) {
    ctx.comm = make_communicator(ctx.state, ctx.options);
    if (g_keep_communicator) g_kept_communicator = ctx.comm;
  }
  return *ctx.comm;
}

void choose_device(DistContext& ctx, const c10::Device& device) {
  if (!device.is_cuda()) return;
  const int index = gpu::checked_index(device.has_index() ? device.index() : -1, "device " + device.str());
  gpu::set_current(index);
  ctx.options.cuda_device = index;
  if (!ctx.options.backend_given && ctx.options.backend == "gloo" && gpu::count() >= ctx.state.local_world_size) {
    ctx.options.backend = "nccl";
  }
}

ReduceOp parse_reduce_op(const std::string& name) {
  if (std::optional<ReduceOp> op = reduce_op_from_name(name)) return *op;
  throw ArgError("reduce op must be 'sum', 'mean', 'max' or 'min', got '" + name + "'");
}

at::Tensor& contiguous_in_place(at::Tensor& t, const char* op) {
  TORCH_CHECK(t.is_contiguous(), op, " needs a contiguous tensor; call :contiguous() first");
  return t;
}

int context_gc(lua_State* L) {
  set_call_site_provider(nullptr);
  static_cast<DistContext*>(lua_touserdata(L, 1))->~DistContext();
  return 0;
}

// The recipe's "file:line" that led to the collective now starting, for
// stall reports and timeout and mismatch messages.
std::string recipe_location(lua_State* L) {
  push_caller_location(L);  // "file:line: "
  size_t length = 0;
  const char* text = lua_tolstring(L, -1, &length);
  std::string where(text ? text : "", length);
  lua_pop(L, 1);
  while (!where.empty() && (where.back() == ' ' || where.back() == ':')) where.pop_back();
  return where;
}

GradientReducer& reducer_at(lua_State* L) {
  auto* handle = test_handle<ReducerHandle>(L, 1, kReducer);
  if (!handle) throw ArgError("expected a GradientReducer as argument 1 (use r:method(...))");
  return *handle->reducer;
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
      // init([device]): joins the process group now (it is joined lazily
      // otherwise). `device` is where this rank computes ("cpu", "cuda:N"):
      // a GPU rank makes N its current device, and takes nccl when the
      // launch named no backend and every local rank has a GPU of its own.
      bind("init", [](lua_State* L, c10::optional<std::string> device) {
        DistContext& ctx = context(L);
        if (!ctx.comm && device) choose_device(ctx, c10::Device(*device));
        communicator(L);
      }),
      bind("backend", [](lua_State* L) { return communicator(L).backend(); }),
      bind("all_reduce", [](lua_State* L, at::Tensor t, c10::optional<std::string> op) {
        communicator(L).all_reduce(contiguous_in_place(t, "all_reduce"),
                                   parse_reduce_op(op.value_or("sum")));
        return t;
      }),
      bind("broadcast", [](lua_State* L, at::Tensor t, int64_t root) {
        at::NoGradGuard no_grad;  // parameters are overwritten in place
        communicator(L).broadcast(contiguous_in_place(t, "broadcast"), static_cast<int>(root));
        // As any in-place write: autograd sees the tensor changed.
        t.unsafeGetTensorImpl()->bump_version();
        return t;
      }),
      bind("all_gather", [](lua_State* L, const at::Tensor& t) {
        return communicator(L).all_gather(t);
      }),
      // reduce_scatter(output, input[, op]): the flat shards of sharded data
      // parallelism (Communicator::reduce_scatter); returns `output` itself.
      bind("reduce_scatter", [](lua_State* L, at::Tensor output, at::Tensor input,
                                c10::optional<std::string> op) {
        at::NoGradGuard no_grad;  // shards of parameters are written in place
        communicator(L).reduce_scatter(output, input, parse_reduce_op(op.value_or("sum")));
        return Self{};
      }),
      // all_gather_into(output, input): every rank's `input` into its slice
      // of `output`, which `input` may be (Communicator::all_gather_into);
      // returns `output` itself.
      bind("all_gather_into", [](lua_State* L, at::Tensor output, const at::Tensor& input) {
        at::NoGradGuard no_grad;
        communicator(L).all_gather_into(output, input);
        return Self{};
      }),
      bind("barrier", [](lua_State* L) { communicator(L).barrier(); }),
      // Ends this rank with `text` as its reported error, beyond any pcall
      // (lua/accel/collective_guard.lua).
      bind("exit_with_error", [](std::string text) { exit_with_error(text); }),
      // Lua strings as uint8 tensors and back, to send serialised objects.
      bind("string_to_bytes", [](std::string s) {
        return at::from_blob(s.data(), {static_cast<int64_t>(s.size())}, at::kByte).clone();
      }),
      bind("bytes_to_string", [](const at::Tensor& t) {
        TORCH_CHECK(t.scalar_type() == at::kByte && t.dim() == 1, "expected a 1-D uint8 tensor, got ",
                    t.scalar_type(), " of shape ", t.sizes());
        at::Tensor c = t.contiguous();
        return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                           static_cast<size_t>(c.numel()));
      }),
      // Run by the worker after the recipe: no rank may exit while a peer
      // still needs it, even only to finish joining the group
      // (Communicator::finish).
      bind("finish", [](lua_State* L) {
        const std::shared_ptr<Communicator>& comm = context(L).comm;
        if (comm && comm->size() > 1) comm->finish();
      }),
      bind("counts", [](lua_State* L) { return push_collective_counts(L, communicator(L).counts()); }),
      // GradientReducer(params[, bucket_bytes[, overlap]]): reduces these
      // parameters' gradients during backward (see engine/parallel/gradient_reducer.h).
      bind("GradientReducer", [](lua_State* L, TensorList params, c10::optional<int64_t> bucket_bytes,
                                 c10::optional<bool> overlap) {
        Communicator& comm = communicator(L);
        auto reducer = std::make_unique<GradientReducer>(
            comm, params.value, bucket_bytes.value_or(GradientReducer::kDefaultBucketBytes),
            overlap.value_or(true));
        push_handle(L, kReducer, ReducerHandle{context(L).comm, std::move(reducer)});
        return Pushed{1};
      }),
  };
}

GradientSync& reducer_sync(lua_State* L) { return reducer_at(L); }

std::vector<Binding> reducer_methods() {
  std::vector<Binding> methods = gradient_sync_methods<reducer_sync>();
  methods.insert(methods.end(), {
      bind("num_buckets", [](lua_State* L, Receiver) { return reducer_at(L).num_buckets(); }),
      // {{"gradient", i}, {"bucket", b}, ...} with 1-based parameter and bucket numbers.
      bind("last_events", [](lua_State* L, Receiver) {
        auto events = reducer_at(L).last_events();
        lua_createtable(L, static_cast<int>(events.size()), 0);
        for (size_t k = 0; k < events.size(); ++k) {
          lua_createtable(L, 2, 0);
          bool gradient = events[k].kind == GradientReducer::Event::Kind::GradientReady;
          lua_pushstring(L, gradient ? "gradient" : "bucket");
          lua_rawseti(L, -2, 1);
          lua_pushnumber(L, static_cast<lua_Number>(events[k].index + 1));
          lua_rawseti(L, -2, 2);
          lua_rawseti(L, -2, static_cast<int>(k + 1));
        }
        return Pushed{1};
      }),
  });
  return methods;
}

}  // namespace

const ProcessState& dist_process_state(lua_State* L) { return context(L).state; }

const CommunicatorOptions& dist_communicator_options(lua_State* L) { return context(L).options; }

void push_gradient_reducer(lua_State* L, std::shared_ptr<Communicator> comm, std::vector<at::Tensor> params,
                           int64_t bucket_bytes) {
  auto reducer = std::make_unique<GradientReducer>(*comm, std::move(params), bucket_bytes);
  push_handle(L, kReducer, ReducerHandle{std::move(comm), std::move(reducer)});
}

std::shared_ptr<Communicator> shared_communicator(lua_State* L) {
  communicator(L);
  return context(L).comm;
}

void keep_communicator_between_states() { g_keep_communicator = true; }

int64_t kept_communicator_collectives() {
  if (!g_kept_communicator) return 0;
  const CollectiveCounts c = g_kept_communicator->counts();
  return c.all_reduce + c.broadcast + c.all_gather + c.barrier + c.reduce_scatter;
}

Pushed push_collective_counts(lua_State* L, const CollectiveCounts& c) {
  lua_createtable(L, 0, 8);
  set_number_fields(L, {{"all_reduce", static_cast<double>(c.all_reduce)},
                        {"all_reduce_shared_memory", static_cast<double>(c.all_reduce_shared_memory)},
                        {"broadcast", static_cast<double>(c.broadcast)},
                        {"all_gather", static_cast<double>(c.all_gather)},
                        {"barrier", static_cast<double>(c.barrier)},
                        {"reduce_scatter", static_cast<double>(c.reduce_scatter)},
                        {"all_gather_bytes", static_cast<double>(c.all_gather_bytes)},
                        {"reduce_scatter_bytes", static_cast<double>(c.reduce_scatter_bytes)}});
  return Pushed{1};
}

void open_distributed(lua_State* L, const CommunicatorOptions& options) {
  lua_pushlightuserdata(L, const_cast<char*>(&kContextKey));
  void* memory = lua_newuserdata(L, sizeof(DistContext));
  ProcessState state = ProcessState::from_environment();
  // The launcher's secret reached the worker once (take_worker_handoff).
  if (!options.rdzv_token.empty()) state.rdzv_token = options.rdzv_token;
  new (memory) DistContext{state, options, g_kept_communicator};
  set_call_site_provider([L] { return recipe_location(L); });
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, context_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);

  lua_newtable(L);
  register_bindings(L, -1, "accel.dist.", dist_bindings());
  register_bindings(L, -1, "accel.dist.", sharding_bindings());
  register_bindings(L, -1, "accel.dist.", process_group_bindings());
}

}  // namespace accel::lua
