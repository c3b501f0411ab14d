// accel.core.autograd: activation checkpointing's engine half for Lua
// (lua/accel/activation_checkpoint.lua is accel.checkpoint itself).
//   checkpoint(run, inputs) -> outputs: run(tensors) calls the block with its
//     tensor arguments in the order given and returns the tensors among its
//     results as an array; it runs now and again when backward reaches the
//     outputs (engine/activation_checkpoint.h), then through the state lent
//     to backward (Note [Lua in backward], lua_in_backward.h).
//   recomputations() -> {total, on_other_threads}
#include "bindings/lua_in_backward.h"
#include "bindings/op_tables.h"
#include "bindings/tensor_handle.h"
#include "engine/activation_checkpoint.h"

#include <memory>
#include <stdexcept>
#include <string>

namespace accel::lua {
namespace {

using Tensors = std::vector<at::Tensor>;

void push_tensors(lua_State* L, const Tensors& tensors) {
  lua_createtable(L, static_cast<int>(tensors.size()), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    push_tensor(L, tensors[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// The array of tensors at `index`; `what` names it in errors.
Tensors read_tensors(lua_State* L, int index, const char* what) {
  if (!lua_istable(L, index)) throw std::runtime_error(std::string(what) + " must be an array of tensors");
  Tensors out;
  const size_t n = lua_objlen(L, index);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, index, static_cast<int>(i));
    at::Tensor* t = to_tensor(L, -1);
    if (!t) throw std::runtime_error(std::string(what) + ": element " + std::to_string(i) + " is not a tensor");
    out.push_back(*t);
    lua_pop(L, 1);
  }
  return out;
}

// Calls run(inputs) with the function at `run_index`, unprotected: an error
// in the first run is the recipe's, raised with its traceback.
Tensors run_block(lua_State* L, int run_index, const Tensors& inputs) {
  lua_pushvalue(L, run_index);
  push_tensors(L, inputs);
  lua_call(L, 1, 1);
  Tensors out = read_tensors(L, -1, "accel.checkpoint: the block's tensors");
  lua_pop(L, 1);
  return out;
}

std::string error_text(lua_State* L, int index) {
  if (const char* text = lua_tostring(L, index)) return text;
  return std::string("(a ") + luaL_typename(L, index) + " raised as an error)";
}

// checkpoint(run, inputs) -> outputs
int checkpoint(lua_State* L) {
  return protect(L, "accel.checkpoint", [L] {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    const Tensors inputs = read_tensors(L, 2, "accel.checkpoint: the inputs");
    release_dropped_references(L);
    lua_pushvalue(L, 1);
    auto block = std::make_shared<LuaReference>(L);
    CheckpointedBlock recompute = [block](const Tensors& inputs) {
      Tensors out;
      block->call_in_backward([&](lua_State* L, int run) {
        lua_pushvalue(L, run);
        push_tensors(L, inputs);
        if (lua_pcall(L, 1, 1, 0) != 0) {
          throw std::runtime_error("accel.checkpoint: recomputing the block in backward: " + error_text(L, -1));
        }
        out = read_tensors(L, -1, "accel.checkpoint: the recomputed block's tensors");
      });
      return out;
    };
    const Tensors outputs =
        accel::checkpoint(inputs, [L](const Tensors& in) { return run_block(L, 1, in); }, std::move(recompute));
    push_tensors(L, outputs);
    return 1;
  });
}

int recomputations(lua_State* L) {
  const RecomputationCounts counts = recomputation_counts();
  lua_createtable(L, 0, 2);
  lua_pushnumber(L, static_cast<double>(counts.total));
  lua_setfield(L, -2, "total");
  lua_pushnumber(L, static_cast<double>(counts.on_other_threads));
  lua_setfield(L, -2, "on_other_threads");
  return 1;
}

}  // namespace

void open_autograd(lua_State* L, int table_index) {
  table_index = table_index < 0 ? lua_gettop(L) + table_index + 1 : table_index;
  lua_pushcfunction(L, checkpoint);
  lua_setfield(L, table_index, "checkpoint");
  lua_pushcfunction(L, recomputations);
  lua_setfield(L, table_index, "recomputations");
}

}  // namespace accel::lua
