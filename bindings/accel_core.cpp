#include "bindings/accel_core.h"

#include "bindings/distributed_ops.h"
#include "bindings/end_of_run.h"
#include "bindings/lua_random.h"
#include "bindings/op_tables.h"
#include "bindings/split_backward_ops.h"
#include "bindings/tensor_fields.h"
#include "bindings/tensor_handle.h"

namespace accel::lua {
namespace {

void add_table(lua_State* L, const char* name, const char* prefix,
               const std::vector<Binding>& bindings) {
  lua_newtable(L);
  register_bindings(L, -1, prefix, bindings);
  lua_setfield(L, -2, name);
}

}  // namespace

int open_accel_core(lua_State* L, const CommunicatorOptions& options) {
  lua_newtable(L);  // core
  int core = lua_gettop(L);

  // Tensor methods double as module functions: t:sum() and accel.sum(t).
  lua_newtable(L);
  int methods = lua_gettop(L);
  for (const auto& table : {tensor_math_bindings(), tensor_compare_bindings(),
                            tensor_reduction_bindings(), tensor_linalg_bindings(),
                            tensor_shape_bindings(), tensor_selection_bindings(),
                            tensor_subscript_bindings(), tensor_random_bindings(),
                            tensor_conversion_bindings(), autograd_method_bindings()}) {
    register_bindings(L, methods, "accel.", table);
  }
  lua_pushnil(L);
  while (lua_next(L, methods) != 0) {
    bool metamethod = std::string(lua_tostring(L, -2)).rfind("__", 0) == 0;
    if (metamethod) {
      lua_pop(L, 1);
      continue;
    }
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, core);
  }
  add_field_metamethods(L, methods);
  open_tensor_metatable(L, methods);
  lua_pop(L, 1);

  register_bindings(L, core, "accel.", tensor_creation_bindings());
  register_bindings(L, core, "accel.", runtime_bindings());
  register_bindings(L, core, "accel.", grad_clipping_bindings());
  register_grad_mode_functions(L, core);
  lua_newtable(L);  // functional
  for (const auto& table : {nn_functional_bindings(), nn_conv_bindings(), nn_pooling_bindings(),
                            nn_normalization_bindings(), nn_embedding_bindings(),
                            nn_attention_bindings(), linear_cross_entropy_bindings()}) {
    register_bindings(L, -1, "accel.nn.functional.", table);
  }
  lua_setfield(L, core, "functional");
  add_table(L, "optim", "accel.optim.", optim_bindings());
  add_table(L, "data", "accel.data.", data_bindings());
  add_table(L, "formats", "accel.formats.", formats_bindings());
  add_table(L, "quant", "accel.quant.", quant_bindings());
  add_table(L, "cuda", "accel.cuda.", cuda_bindings());
  add_table(L, "graphs", "accel.graphs.", cuda_graph_bindings());
  add_table(L, "profiler", "accel.profiler.", profiler_bindings());
  add_table(L, "tracking", "accel.tracking.", tracking_bindings());
  add_table(L, "live", "accel.live.", live_control_bindings());
  lua_getfield(L, core, "live");
  lua_pushcfunction(L, raise_end_of_run);  // raw: lua_error, not a C++ exception
  lua_setfield(L, -2, "end_run");
  lua_pop(L, 1);
  add_table(L, "async_checkpoint", "accel.async_checkpoint.", async_checkpoint_bindings());
  add_table(L, "json", "accel.json.", json_bindings());
  add_table(L, "tokenizers", "accel.tokenizers.", tokenizer_bindings());
  add_table(L, "chat_template", "accel.tokenizers.", chat_template_bindings());
  lua_getfield(L, core, "json");
  push_json_null(L);
  lua_setfield(L, -2, "null");
  lua_pop(L, 1);
  register_bindings(L, core, "accel.", lua_random_bindings());
  lua_newtable(L);
  open_amp(L, -1);
  lua_setfield(L, core, "amp");
  lua_newtable(L);
  open_autograd(L, -1);
  register_bindings(L, -1, "accel.autograd.", split_backward_bindings());
  lua_setfield(L, core, "autograd");
  open_distributed(L, options);
  lua_setfield(L, core, "dist");
  return 1;
}

}  // namespace accel::lua
