// The declarative tables of bound functions, one per area; luaopen_accel_core
// installs them. Each entry is a name and a plain C++ function whose
// parameter types define the argument checks (see registration.h).
#pragma once
#include <vector>

#include "bindings/lua_support.h"

namespace accel::lua {

// Functions that are also tensor methods (`accel.sum(t)` and `t:sum()`);
// entries named "__..." become metamethods.
std::vector<Binding> tensor_math_bindings();
std::vector<Binding> tensor_compare_bindings();
std::vector<Binding> tensor_reduction_bindings();
std::vector<Binding> tensor_linalg_bindings();
std::vector<Binding> tensor_shape_bindings();
std::vector<Binding> tensor_selection_bindings();
std::vector<Binding> tensor_subscript_bindings();
std::vector<Binding> tensor_random_bindings();
std::vector<Binding> tensor_conversion_bindings();
std::vector<Binding> autograd_method_bindings();

// Module functions only.
std::vector<Binding> tensor_creation_bindings();
std::vector<Binding> nn_functional_bindings();
// Layers as functions, one family a table, installed into the same
// accel.nn.functional table.
std::vector<Binding> nn_conv_bindings();
std::vector<Binding> nn_pooling_bindings();
std::vector<Binding> nn_normalization_bindings();
std::vector<Binding> nn_embedding_bindings();
std::vector<Binding> nn_attention_bindings();
std::vector<Binding> linear_cross_entropy_bindings();
std::vector<Binding> runtime_bindings();
std::vector<Binding> grad_clipping_bindings();
std::vector<Binding> optim_bindings();
std::vector<Binding> data_bindings();
// accel.core.formats: checkpoint and weight file I/O (formats_ops.cpp).
std::vector<Binding> formats_bindings();
// accel.core.async_checkpoint: checkpoints written in the background (async_checkpoint_ops.cpp).
std::vector<Binding> async_checkpoint_bindings();
// accel.core.tracking: metrics.jsonl and TensorBoard event files (tracking_ops.cpp).
std::vector<Binding> tracking_bindings();
// accel.core.live: a live run's control channel on the worker's side (live_control_ops.cpp).
std::vector<Binding> live_control_bindings();
// accel.core.json: JSON files as Lua tables (json_ops.cpp); json.null is
// pushed by push_json_null.
std::vector<Binding> json_bindings();
void push_json_null(lua_State* L);
// accel.core.tokenizers: tokenizer.json and SentencePiece tokenizers (tokenizer_ops.cpp).
std::vector<Binding> tokenizer_bindings();
// accel.core.chat_template: chat templates, compiled and rendered (chat_template_ops.cpp).
std::vector<Binding> chat_template_bindings();
// accel.core.quant: bitsandbytes' 4-bit weights (quant_ops.cpp).
std::vector<Binding> quant_bindings();
// accel.cuda: GPUs, their memory and generators (cuda_ops.cpp).
std::vector<Binding> cuda_bindings();
// accel.core.graphs: CUDA graphs of training steps (cuda_graph_ops.cpp).
std::vector<Binding> cuda_graph_bindings();
// accel.core.profiler: LibTorch's profiler writing Chrome traces (profiler_ops.cpp).
std::vector<Binding> profiler_bindings();

// Fills the table at `table_index` with autocast and LossScaler.
void open_amp(lua_State* L, int table_index);
// Fills the table at `table_index` with checkpoint (accel.checkpoint's
// engine half) and recomputations (activation_checkpoint_ops.cpp).
void open_autograd(lua_State* L, int table_index);

// no_grad(fn) and enable_grad(fn) call back into Lua, so they are written
// by hand rather than bound.
void register_grad_mode_functions(lua_State* L, int table_index);

}  // namespace accel::lua
