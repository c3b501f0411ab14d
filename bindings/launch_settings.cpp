#include "bindings/launch_settings.h"

#include <string>

#include "engine/protocol/launch_options.h"

namespace accel::lua {
namespace {

void set_string(lua_State* L, const char* key, const std::string& value) {
  if (value.empty()) return;
  lua_pushstring(L, value.c_str());
  lua_setfield(L, -2, key);
}

void set_number(lua_State* L, const char* key, double value) {
  lua_pushnumber(L, value);
  lua_setfield(L, -2, key);
}

// "true" and "false" as booleans; the launcher checked the values.
void set_flag(lua_State* L, const char* key, const std::string& value) {
  if (value.empty()) return;
  lua_pushboolean(L, value == "true");
  lua_setfield(L, -2, key);
}

}  // namespace

void push_launch_settings(lua_State* L, const LaunchOptions& options) {
  lua_createtable(L, 0, 12);
  set_number(L, "threads", options.threads);
  set_string(L, "backend", options.backend);
  set_number(L, "timeout", options.timeout_s);
  lua_pushboolean(L, options.debug);
  lua_setfield(L, -2, "debug");
  set_number(L, "max_restarts", options.max_restarts);
  set_number(L, "restart_count", options.restart_count);
  set_string(L, "mixed_precision", options.mixed_precision);
  if (options.gradient_accumulation_steps > 0) {
    set_number(L, "gradient_accumulation_steps", options.gradient_accumulation_steps);
  }
  if (options.use_deepspeed) set_number(L, "zero_stage", options.zero_stage);
  set_flag(L, "zero3_init_flag", options.zero3_init_flag);
  if (options.use_fsdp) {
    const FsdpSettings& f = options.fsdp;
    lua_createtable(L, 0, 8);
    set_string(L, "sharding_strategy", f.sharding_strategy);
    set_string(L, "auto_wrap_policy", f.auto_wrap_policy);
    set_string(L, "transformer_layer_cls", f.transformer_layer_cls);
    if (!f.min_num_params.empty()) set_number(L, "min_num_params", std::stod(f.min_num_params));
    set_flag(L, "cpu_offload", f.cpu_offload);
    set_string(L, "state_dict_type", f.state_dict_type);
    set_flag(L, "sync_module_states", f.sync_module_states);
    set_flag(L, "cpu_ram_efficient_loading", f.cpu_ram_efficient_loading);
    lua_setfield(L, -2, "fsdp");
  }
  // The mesh's sizes the launch gives: the Accelerator's default ParallelismConfig.
  if (options.parallelism.given()) {
    const ParallelismSizes& p = options.parallelism;
    lua_createtable(L, 0, 9);
    for (const auto& [key, size] : {std::pair<const char*, int>{"dp_replicate_size", p.dp_replicate},
                                    {"dp_shard_size", p.dp_shard}, {"cp_size", p.cp}, {"tp_size", p.tp},
                                    {"pp_size", p.pp}, {"ep_size", p.ep}, {"pp_microbatches", p.pp_microbatches},
                                    {"pp_virtual_stages", p.pp_virtual_stages}}) {
      if (size > 0) set_number(L, key, size);
    }
    set_string(L, "pp_schedule", p.pp_schedule);
    lua_setfield(L, -2, "parallelism_config");
  }
}

}  // namespace accel::lua
