// Autograd from Lua: backward, detach, grad modes. Lua runs inside
// LibTorch's backward only to recompute checkpointed blocks, on the state
// backward lends (Note [Lua in backward], lua_in_backward.h); no Lua hooks
// are registered on the graph.
#include "bindings/lua_in_backward.h"
#include "bindings/op_tables.h"
#include "engine/comm/communicator.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;

// Calls the function at index 1 with grad mode set to `enabled`. The call is
// unprotected so an error keeps its full traceback; the guard restores the
// previous mode because LuaJIT on x64 unwinds errors through C++ frames
// like exceptions, running destructors.
int call_with_grad_mode(lua_State* L, bool enabled) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  int base = lua_gettop(L);
  at::AutoGradMode mode(enabled);
  lua_pushvalue(L, 1);
  lua_call(L, 0, LUA_MULTRET);
  return lua_gettop(L) - base;
}

int no_grad(lua_State* L) { return call_with_grad_mode(L, false); }
int enable_grad(lua_State* L) { return call_with_grad_mode(L, true); }

}  // namespace

std::vector<Binding> autograd_method_bindings() {
  return {
      bind("backward", [](lua_State* L, T t, c10::optional<Tensor> gradient, c10::optional<bool> retain_graph) {
        TORCH_CHECK(gradient || t.numel() == 1,
                    "backward() without a gradient needs a one-element tensor, got shape ",
                    t.sizes());
        // The recipe line of this backward, for the gradient buckets it starts.
        PinnedCallSite site(current_call_site());
        LentToBackward lent(L);
        t.backward(gradient.value_or(Tensor()), retain_graph);
      }),
      bind("detach", [](T t) { return t.detach(); }),
      // set_data(new): t takes new's values, shape, dtype and device while
      // staying the same tensor (PyTorch's `t.data = new`): what holds t,
      // an optimizer say, sees the change. Module:to moves parameters so.
      bind("set_data", [](Tensor t, T data) {
        t.set_data(data);
        return Self{};
      }),
      bind("detach_", [](Tensor t) {
        t.detach_();
        return Self{};
      }),
      bind("requires_grad_", [](Tensor t, c10::optional<bool> flag) {
        t.requires_grad_(flag.value_or(true));
        return Self{};
      }),
      bind("retain_grad", [](Tensor t) {
        t.retain_grad();
        return Self{};
      }),
  };
}

void register_grad_mode_functions(lua_State* L, int table_index) {
  table_index = table_index < 0 ? lua_gettop(L) + table_index + 1 : table_index;
  lua_pushcfunction(L, no_grad);
  lua_setfield(L, table_index, "no_grad");
  lua_pushcfunction(L, enable_grad);
  lua_setfield(L, table_index, "enable_grad");
}

}  // namespace accel::lua
