// accel.core.dist.ShardedModel: sharded data parallel for one model
// (engine/parallel/sharded_model.h), driven by lua/accel/parallel/fsdp/. Units are
// numbered from 1, the root first.
#include <memory>
#include <utility>

#include "bindings/distributed_ops.h"
#include "bindings/gradient_sync_methods.h"
#include "bindings/lua_support.h"
#include "bindings/optim_ops.h"
#include "engine/tensor_description.h"
#include "engine/comm/communicator.h"
#include "engine/parallel/flat_parameter.h"
#include "engine/parallel/sharded_model.h"

namespace accel::lua {
namespace {

// A sharded model keeps its communicators alive, as a reducer does: the
// shard group's, and on a mesh the groups around it (MeshGroups).
struct ShardedHandle {
  std::shared_ptr<Communicator> comm;
  std::vector<std::shared_ptr<Communicator>> mesh_groups;
  std::unique_ptr<ShardedModel> model;
};

std::vector<Binding> sharded_methods();
const HandleType kSharded{"accel.ShardedModel", "ShardedModel:", sharded_methods};

ShardedModel& self(lua_State* L) {
  return *check_handle<ShardedHandle>(L, 1, kSharded).model;
}

size_t unit_index(int64_t unit) {
  return static_cast<size_t>(unit - 1);
}

// {{p, p, ...}, {p, ...}}: the units' parameters.
std::vector<std::vector<at::Tensor>> read_units(lua_State* L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError("argument 2: expected a list of parameter lists");
  std::vector<std::vector<at::Tensor>> units(lua_objlen(L, idx));
  for (size_t u = 0; u < units.size(); ++u) {
    lua_rawgeti(L, idx, static_cast<int>(u + 1));
    const size_t n = lua_type(L, -1) == LUA_TTABLE ? lua_objlen(L, -1) : 0;
    for (size_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      at::Tensor* t = to_tensor(L, -1);
      if (!t) throw ArgError("unit " + std::to_string(u + 1) + ", parameter " + std::to_string(i) + " is not a tensor");
      units[u].push_back(*t);
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
  }
  return units;
}

void set_number(lua_State* L, const char* key, int64_t value) {
  lua_pushnumber(L, static_cast<lua_Number>(value));
  lua_setfield(L, -2, key);
}

// A list of integers (a shape, group sizes) as a Lua sequence.
void push_integers(lua_State* L, at::IntArrayRef shape) {
  lua_createtable(L, static_cast<int>(shape.size()), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    lua_pushnumber(L, static_cast<lua_Number>(shape[d]));
    lua_rawseti(L, -2, static_cast<int>(d + 1));
  }
}

// The flat layout, for sharded checkpoints, with the optimizer's indices:
// {flats = {{shard = t, numel = n, shard_numel = s, shard_rank = r, shards = g,
//             split_over_tp = b, offloaded = b, optimizer_index = i, params = {
//              {unit = u, position = j, offset = o, shape = {...}, optimizer_index = i}, ...}}, ...},
//  group_sizes = {n, ...}}  (the optimizer's groups before sharding)
// Units and positions count from 1 (the lists given to ShardedModel);
// shard_rank is this rank's place in the shard group (from 0) and shards
// the group's size (on a mesh, dp_shard's; else the world's);
// offsets and optimizer indices from 0, as the flat buffer and the
// optimizer's state keys do; -1: not held by the optimizer.
Pushed flat_parameters(lua_State* L) {
  ShardedModel& model = self(L);
  const auto indices = model.optimizer_indices(optimizer_arg(L, 2));
  lua_createtable(L, 0, 2);
  push_integers(L, model.original_group_sizes());
  lua_setfield(L, -2, "group_sizes");
  lua_createtable(L, static_cast<int>(model.num_flat_parameters()), 0);
  for (size_t k = 0; k < static_cast<size_t>(model.num_flat_parameters()); ++k) {
    FlatParameter& flat = model.flat_parameter(k);
    lua_createtable(L, 0, 5);
    push_tensor(L, flat.shard());
    lua_setfield(L, -2, "shard");
    set_number(L, "numel", flat.numel());
    set_number(L, "shard_numel", flat.shard_numel());
    set_number(L, "shard_rank", flat.rank());
    set_number(L, "shards", flat.world_size());
    lua_pushboolean(L, model.split_over_tp(k));
    lua_setfield(L, -2, "split_over_tp");
    lua_pushboolean(L, flat.offloaded());
    lua_setfield(L, -2, "offloaded");
    set_number(L, "optimizer_index", indices[k].shard);
    lua_createtable(L, static_cast<int>(flat.params().size()), 0);
    for (size_t i = 0; i < flat.params().size(); ++i) {
      lua_createtable(L, 0, 5);
      set_number(L, "unit", static_cast<int64_t>(model.origins(k)[i].unit + 1));
      set_number(L, "position", static_cast<int64_t>(model.origins(k)[i].position + 1));
      set_number(L, "offset", flat.offset(i));
      set_number(L, "optimizer_index", indices[k].original[i]);
      push_integers(L, flat.shape(i));
      lua_setfield(L, -2, "shape");
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "params");
    lua_rawseti(L, -2, static_cast<int>(k + 1));
  }
  lua_setfield(L, -2, "flats");
  return Pushed{1};
}

GradientSync& sharded_sync(lua_State* L) { return self(L); }

// The optional mesh table {shard = group, replicate = group, tp = group,
// tp_split = {p, ...}} at `idx`: the shard group (nil: the world), and the
// groups around it, which `keep` holds.
std::shared_ptr<Communicator> read_mesh(lua_State* L, int idx, MeshGroups& mesh,
                                        std::vector<std::shared_ptr<Communicator>>& keep) {
  if (lua_isnoneornil(L, idx)) return shared_communicator(L);
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError("argument 6: expected the mesh's groups as a table");
  auto group = [&](const char* key) -> std::shared_ptr<Communicator> {
    lua_getfield(L, idx, key);
    std::shared_ptr<Communicator> comm;
    if (!lua_isnil(L, -1)) comm = group_communicator_arg(L, lua_gettop(L), (std::string("mesh.") + key).c_str());
    lua_pop(L, 1);
    return comm;
  };
  std::shared_ptr<Communicator> shard = group("shard");
  if (!shard) throw ArgError("argument 6: mesh.shard, the shard group, is missing");
  for (const char* key : {"replicate", "tp"}) {
    if (std::shared_ptr<Communicator> comm = group(key)) {
      (std::string(key) == "tp" ? mesh.tp : mesh.replicate) = comm.get();
      keep.push_back(std::move(comm));
    }
  }
  lua_getfield(L, idx, "tp_split");
  const size_t n = lua_type(L, -1) == LUA_TTABLE ? lua_objlen(L, -1) : 0;
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, -1, static_cast<int>(i));
    at::Tensor* t = to_tensor(L, -1);
    if (!t) throw ArgError("mesh.tp_split[" + std::to_string(i) + "] is not a tensor");
    mesh.tp_split.push_back(*t);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return shard;
}

// The optional {param_dtype = d, reduce_dtype = d} at `idx`.
MixedPrecisionPolicy read_precision(lua_State* L, int idx) {
  MixedPrecisionPolicy policy;
  if (lua_isnoneornil(L, idx)) return policy;
  if (lua_type(L, idx) != LUA_TTABLE) throw ArgError("argument 7: expected the mixed precision policy as a table");
  for (auto [key, field] : {std::pair{"param_dtype", &policy.param_dtype},
                            std::pair{"reduce_dtype", &policy.reduce_dtype}}) {
    lua_getfield(L, idx, key);
    if (lua_type(L, -1) == LUA_TSTRING) *field = parse_dtype(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return policy;
}

std::vector<Binding> sharded_methods() {
  std::vector<Binding> methods = gradient_sync_methods<sharded_sync>();
  methods.insert(methods.end(), {
      bind("stage", [](lua_State* L, Receiver) { return static_cast<int64_t>(self(L).stage()); }),
      // Whether gradients end each backward in the shards (their .grad, this
      // rank's slices) rather than in the parameters: stages 2 and 3, which
      // reduce every backward.
      bind("holds_gradient_slices", [](lua_State* L, Receiver) { return self(L).stage() >= 2; }),
      // The units' parameters now, {{p, ...}, ...} in the order given: a
      // meta parameter given is a new tensor here, for the model to take.
      bind("unit_parameters", [](lua_State* L, Receiver) {
        const auto units = self(L).unit_parameters();
        lua_createtable(L, static_cast<int>(units.size()), 0);
        for (size_t u = 0; u < units.size(); ++u) {
          push(L, units[u]);
          lua_rawseti(L, -2, static_cast<int>(u + 1));
        }
        return Pushed{1};
      }),
      bind("shard_optimizer", [](lua_State* L, Receiver) { self(L).shard_optimizer(optimizer_arg(L, 2)); }),
      // offload_to_host(pin_memory): shards, gradient slices and optimizer
      // state on the host (engine/parallel/cpu_offload.h), before shard_optimizer.
      bind("offload_to_host", [](lua_State* L, Receiver, bool pin_memory) {
        self(L).offload_to_host(CpuOffload{pin_memory});
      }),
      bind("before_forward", [](lua_State* L, Receiver, int64_t unit) {
        self(L).before_forward(unit_index(unit));
      }),
      bind("after_forward", [](lua_State* L, Receiver, int64_t unit, TensorList outputs, bool keep) {
        self(L).after_forward(unit_index(unit), outputs.value, keep);
      }),
      bind("gather_all", [](lua_State* L, Receiver) { self(L).gather_all(); }),
      bind("release_all", [](lua_State* L, Receiver) { self(L).release_all(); }),
      bind("keep_written_parameters", [](lua_State* L, Receiver) { self(L).keep_written_parameters(); }),
      bind("clip_grad_norm", [](lua_State* L, Receiver, double max_norm, c10::optional<double> norm_type) {
        return self(L).clip_grad_norm(max_norm, norm_type.value_or(2.0));
      }),
      bind("grad_norm", [](lua_State* L, Receiver, c10::optional<double> norm_type) {
        return self(L).grad_norm(norm_type.value_or(2.0));
      }),
      bind("clip_grad_value", [](lua_State* L, Receiver, double value) { self(L).clip_grad_value(value); }),
      bind("shards", [](lua_State* L, Receiver) { return self(L).shards(); }),
      bind("before_step", [](lua_State* L, Receiver) { self(L).before_step(); }),
      bind("after_step", [](lua_State* L, Receiver) { self(L).after_step(); }),
      bind("zero_grad", [](lua_State* L, Receiver, c10::optional<bool> set_to_none) {
        self(L).zero_grad(set_to_none.value_or(true));
      }),
      // flat_parameters(optimizer): the layout above.
      bind("flat_parameters", flat_parameters),
      // The optimizer's state in its layout before sharding (a collective),
      // and back (engine/parallel/full_optimizer_state.cpp).
      bind("full_optimizer_state", [](lua_State* L, Receiver) {
        push_state_dict(L, self(L).full_optimizer_state(optimizer_arg(L, 2)));
        return Pushed{1};
      }),
      bind("load_full_optimizer_state", [](lua_State* L, Receiver) {
        self(L).load_full_optimizer_state(optimizer_arg(L, 2), read_state_dict(L, 3));
      }),
  });
  return methods;
}

}  // namespace

std::vector<Binding> sharding_bindings() {
  return {
      // ShardedModel(stage, units, optimizer[, bucket_bytes[, device[, mesh[, precision]]]]):
      // the flat buffers on `device` (default "cpu"), sharded over the world
      // or, on a device mesh, over mesh.shard (read_mesh above);
      // `precision` is {param_dtype = d, reduce_dtype = d} (each optional).
      bind("ShardedModel", [](lua_State* L, int64_t stage) {
        MeshGroups mesh;
        std::vector<std::shared_ptr<Communicator>> keep;
        std::shared_ptr<Communicator> comm = read_mesh(L, 6, mesh, keep);
        const int64_t bucket_bytes = lua_isnoneornil(L, 4) ? 25 * 1024 * 1024 : luaL_checkinteger(L, 4);
        const at::Device device(lua_isnoneornil(L, 5) ? std::string("cpu") : std::string(luaL_checkstring(L, 5)));
        auto model = std::make_unique<ShardedModel>(*comm, static_cast<int>(stage), read_units(L, 2),
                                                    optimizer_arg(L, 3), bucket_bytes, device, std::move(mesh),
                                                    read_precision(L, 7));
        push_handle(L, kSharded, ShardedHandle{std::move(comm), std::move(keep), std::move(model)});
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
