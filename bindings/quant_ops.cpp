// accel.core.quant: bitsandbytes' 4-bit weights (engine/quant/). A 4-bit
// weight crosses to Lua as one table whose fields are named as in the
// folders transformers saves:
//   {weight = packed uint8 codes, absmax, quant_map, nested_absmax,
//    nested_quant_map (both absent without double quantization),
//    blocksize, quant_type, shape = {out, in}, dtype, nested_blocksize,
//    nested_offset}
// quantize_4bit returns one; dequantize_4bit and linear_4bit read one.
// shard_4bit gives a rank's shard of one over a ProcessGroup (FSDP's
// sharding of a QLoRA base), gather_4bit the whole again.
#include "bindings/distributed_ops.h"
#include "bindings/op_tables.h"
#include "engine/comm/communicator.h"
#include "engine/quant/four_bit_shards.h"
#include "engine/quant/four_bit_weight.h"
#include "engine/quant/linear_4bit.h"
#include "engine/tensor_description.h"

namespace accel::lua {
namespace {

using T = const at::Tensor&;
using at::Tensor;
using quant::FourBitWeight;

const std::initializer_list<const char*> kWeightFields = {
    "weight", "absmax", "quant_map", "nested_absmax", "nested_quant_map", "blocksize", "quant_type",
    "shape", "dtype", "nested_blocksize", "nested_offset"};

Tensor required_tensor(lua_State* L, const Options& t, const char* name) {
  auto value = option_tensor(L, t, name);
  TORCH_CHECK(value, "the 4-bit weight's table has no tensor '", name, "'");
  return *value;
}

// The fields a weight's table and a shard's share, unchecked.
FourBitWeight read_fields(lua_State* L, const Options& t) {
  TORCH_CHECK(t.index != 0, "expected the 4-bit weight's table");
  FourBitWeight w;
  w.packed = required_tensor(L, t, "weight");
  w.absmax = required_tensor(L, t, "absmax");
  w.quant_map = required_tensor(L, t, "quant_map");
  w.blocksize = option_integer(L, t, "blocksize", 64);
  w.quant_type = option_string(L, t, "quant_type", "nf4");
  w.shape = option_integers(L, t, "shape", {});
  w.dtype = parse_dtype(option_string(L, t, "dtype", "float32"));
  if (auto nested = option_tensor(L, t, "nested_absmax")) {
    w.nested_absmax = *nested;
    w.nested_quant_map = required_tensor(L, t, "nested_quant_map");
    w.nested_blocksize = option_integer(L, t, "nested_blocksize", 256);
    w.nested_offset = option_number(L, t, "nested_offset", 0);
  }
  return w;
}

FourBitWeight read_weight(lua_State* L, const Options& t) {
  check_option_names(L, t, kWeightFields);
  FourBitWeight w = read_fields(L, t);
  quant::check_four_bit_weight(w, "the 4-bit weight");
  return w;
}

// A shard's table (shard_4bit's): the weight's fields, its bytes and absmax
// this rank's, and quant_storage and ranks.
quant::FourBitShard read_shard(lua_State* L, const Options& t) {
  check_option_names(L, t, {"weight", "absmax", "quant_map", "nested_absmax", "nested_quant_map", "blocksize",
                            "quant_type", "shape", "dtype", "nested_blocksize", "nested_offset", "quant_storage",
                            "ranks"});
  quant::FourBitShard s;
  s.part = read_fields(L, t);
  s.quant_storage = parse_dtype(option_string(L, t, "quant_storage", "uint8"));
  s.ranks = option_integer(L, t, "ranks", 1);
  quant::check_four_bit_shard(s, "the 4-bit weight's shard");
  return s;
}

void set_tensor(lua_State* L, const char* name, const Tensor& t) {
  push_tensor(L, t);
  lua_setfield(L, -2, name);
}

Pushed push_weight(lua_State* L, const FourBitWeight& w) {
  lua_newtable(L);
  set_tensor(L, "weight", w.packed);
  set_tensor(L, "absmax", w.absmax);
  set_tensor(L, "quant_map", w.quant_map);
  lua_pushinteger(L, w.blocksize);
  lua_setfield(L, -2, "blocksize");
  lua_pushstring(L, w.quant_type.c_str());
  lua_setfield(L, -2, "quant_type");
  push(L, w.shape);
  lua_setfield(L, -2, "shape");
  lua_pushstring(L, dtype_text(w.dtype).c_str());
  lua_setfield(L, -2, "dtype");
  if (w.nested()) {
    set_tensor(L, "nested_absmax", w.nested_absmax);
    set_tensor(L, "nested_quant_map", w.nested_quant_map);
    lua_pushinteger(L, w.nested_blocksize);
    lua_setfield(L, -2, "nested_blocksize");
    lua_pushnumber(L, w.nested_offset);
    lua_setfield(L, -2, "nested_offset");
  }
  return {1};
}

}  // namespace

std::vector<Binding> quant_bindings() {
  return {
      // quantize_4bit(w [, {blocksize = 64, quant_type = "nf4", double_quant = false,
      // quant_storage = "uint8"}]) -> the 4-bit weight's table.
      bind("quantize_4bit", [](lua_State* L, T w, Options o) {
        check_option_names(L, o, {"blocksize", "quant_type", "double_quant", "quant_storage"});
        quant::FourBitOptions options;
        options.blocksize = option_integer(L, o, "blocksize", 64);
        options.quant_type = option_string(L, o, "quant_type", "nf4");
        options.double_quant = option_boolean(L, o, "double_quant", false);
        options.quant_storage = parse_dtype(option_string(L, o, "quant_storage", "uint8"));
        return push_weight(L, quant::quantize_4bit(w, options));
      }),
      // dequantize_4bit(weight_table [, dtype]) -> the weight, (out, in), in dtype (its own by default).
      bind("dequantize_4bit", [](lua_State* L, Options t, c10::optional<at::ScalarType> dtype) {
        FourBitWeight w = read_weight(L, t);
        return quant::dequantize_4bit(w, dtype.value_or(w.dtype));
      }),
      // linear_4bit(x, weight_table, bias|nil, compute_dtype[, group]) -> x W^T + b in x's dtype;
      // with a ProcessGroup the table is this rank's shard (shard_4bit), gathered for the product.
      bind("linear_4bit", [](lua_State* L, T x, Options t, c10::optional<Tensor> bias, at::ScalarType compute) {
        if (lua_gettop(L) >= 5 && !lua_isnil(L, 5)) {
          return quant::linear_4bit(x, read_shard(L, t), group_communicator_arg(L, 5, "argument 5 (group)"), bias,
                                    compute);
        }
        return quant::linear_4bit(x, read_weight(L, t), bias, compute);
      }),
      // shard_4bit(weight_table, group) -> this rank's shard's table: the weight's fields, `weight`
      // and `absmax` those of its whole blocks only (engine/quant/four_bit_shards.h), plus
      // quant_storage and ranks.
      bind("shard_4bit", [](lua_State* L, Options t) {
        const auto group = group_communicator_arg(L, 2, "argument 2 (group)");
        const quant::FourBitShard s = quant::shard_four_bit(read_weight(L, t), group->rank(), group->size());
        push_weight(L, s.part);
        lua_pushstring(L, dtype_text(s.quant_storage).c_str());
        lua_setfield(L, -2, "quant_storage");
        lua_pushinteger(L, s.ranks);
        lua_setfield(L, -2, "ranks");
        return Pushed{1};
      }),
      // gather_4bit(shard_table, group) -> the whole weight's table (a collective).
      bind("gather_4bit", [](lua_State* L, Options t) {
        return push_weight(L, quant::gather_four_bit(read_shard(L, t), *group_communicator_arg(L, 2,
                                                                                               "argument 2 (group)")));
      }),
  };
}

}  // namespace accel::lua
