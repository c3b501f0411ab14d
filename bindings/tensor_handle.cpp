#include "bindings/tensor_handle.h"

extern "C" {
#include <lauxlib.h>
}

#include <ATen/ATen.h>

#include <algorithm>
#include <new>
#include <string>

namespace accel::lua {
namespace {

// Identifies a tensor handle among userdata: cheaper to test than the
// metatable, which every tensor argument of every call is checked against.
// Lua code cannot make full userdata, and no other userdata in a worker has
// this size and this address in its first word.
constexpr char kTensorTag = 0;

struct TensorHandle {
  const char* tag;
  at::Tensor tensor;
  int64_t bytes;
};

// Process-wide like the allocator they describe: a worker has one Lua state.
TensorStats g_stats;
int64_t g_made_since_collection = 0;
int64_t g_live_after_collection = 0;
int g_metatable_ref = LUA_NOREF;

// Low, because a handle's counted bytes understate what it pins (a loss
// keeps its whole autograd graph alive): at 32 MiB a small MLP's worker
// peaked 40 MiB higher. A full collection costs ~0.2 ms, so even a 1 ms step
// that makes 300 KB of tensors pays under 1%.
constexpr int64_t kCollectionFloorBytes = 4 << 20;
// And high enough, never above this: in a large model the live bytes are
// mostly parameters and optimizer state, which are not garbage, and a pause
// of their size let each step's dead tensors pile up to it (a 98M-parameter
// model sharded over 2 ranks grew 265 MiB in 6 steps, its sharded state
// being 745 MiB a rank). A collection there costs about a millisecond, a
// step about a second.
constexpr int64_t kCollectionCeilingBytes = 64 << 20;

// A view counts its own extent, not its base's whole storage: indexing rows of
// a large tensor in a loop must not look like allocating the tensor again.
// A meta tensor has a storage size but no memory behind it.
int64_t handle_bytes(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.is_meta()) return 0;
  return std::min(static_cast<int64_t>(t.storage().nbytes()),
                  t.numel() * static_cast<int64_t>(t.element_size()));
}

void pace_collector(lua_State* L, int64_t bytes) {
  g_made_since_collection += bytes;
  const int64_t pause = std::clamp(g_live_after_collection, kCollectionFloorBytes, kCollectionCeilingBytes);
  if (g_made_since_collection <= pause) return;
  g_made_since_collection = 0;
  ++g_stats.collections;
  lua_gc(L, LUA_GCCOLLECT, 0);
  g_live_after_collection = g_stats.live_bytes;
}

int tensor_gc(lua_State* L) {
  auto* handle = static_cast<TensorHandle*>(lua_touserdata(L, 1));
  g_stats.live_handles -= 1;
  g_stats.live_bytes -= handle->bytes;
  handle->~TensorHandle();
  return 0;
}

}  // namespace

TensorStats tensor_stats() { return g_stats; }

void push_tensor(lua_State* L, at::Tensor t) {
  if (!t.defined()) {  // an absent result (no grad yet, no indices) is nil
    lua_pushnil(L);
    return;
  }
  int64_t bytes = handle_bytes(t);
  void* memory = lua_newuserdata(L, sizeof(TensorHandle));
  new (memory) TensorHandle{&kTensorTag, std::move(t), bytes};
  lua_rawgeti(L, LUA_REGISTRYINDEX, g_metatable_ref);
  lua_setmetatable(L, -2);
  g_stats.live_handles += 1;
  g_stats.live_bytes += bytes;
  pace_collector(L, bytes);
}

void release_tensor(lua_State* L, int idx) {
  TORCH_CHECK(to_tensor(L, idx), "release_tensor: expected a tensor, got a ", type_name_at(L, idx));
  auto* handle = static_cast<TensorHandle*>(lua_touserdata(L, idx));
  g_stats.live_bytes -= handle->bytes;
  g_made_since_collection = std::max<int64_t>(0, g_made_since_collection - handle->bytes);
  handle->bytes = 0;
  handle->tensor = at::Tensor();
}

at::Tensor* to_tensor(lua_State* L, int idx) {
  void* memory = lua_touserdata(L, idx);
  if (!memory || lua_objlen(L, idx) != sizeof(TensorHandle)) return nullptr;
  auto* handle = static_cast<TensorHandle*>(memory);
  return handle->tag == &kTensorTag ? &handle->tensor : nullptr;
}

const char* type_name_at(lua_State* L, int idx) {
  if (to_tensor(L, idx)) return "tensor";
  return lua_typename(L, lua_type(L, idx));
}

void open_tensor_metatable(lua_State* L, int methods_index) {
  methods_index = methods_index < 0 ? lua_gettop(L) + methods_index + 1 : methods_index;
  lua_newtable(L);
  lua_pushcfunction(L, tensor_gc);
  lua_setfield(L, -2, "__gc");
  lua_pushliteral(L, "tensor");
  lua_setfield(L, -2, "__name");
  // Metamethods (__index, __add, __tostring, ...) are bindings like any op:
  // the method table carries them and they are copied here.
  lua_pushnil(L);
  while (lua_next(L, methods_index) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING && std::string(lua_tostring(L, -2)).rfind("__", 0) == 0) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    } else {
      lua_pop(L, 1);
    }
  }
  g_metatable_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

}  // namespace accel::lua
