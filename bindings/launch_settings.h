// accel.core.launch: what the launch said (accel-run's options, its config
// file, or mpirun's command line), as one Lua table the worker hands the
// Lua side once. The Lua files read their launch defaults here, never from
// environment variables (engine/protocol/accel_variables.h).
#pragma once

extern "C" {
#include <lua.h>
}

namespace accel {
struct LaunchOptions;
}

namespace accel::lua {

// Pushes the table. Always present: threads, backend, timeout (seconds),
// debug, max_restarts, restart_count. Present only when the launch gave
// them (nil otherwise, leaving the recipe's choice): mixed_precision,
// gradient_accumulation_steps, zero_stage, zero3_init_flag (boolean), and
// fsdp, a table of the FSDP plugin's options the launch gave
// (sharding_strategy, auto_wrap_policy, transformer_layer_cls (a string of
// names), min_num_params (a number), cpu_offload, state_dict_type,
// sync_module_states, cpu_ram_efficient_loading (booleans)), present when
// the launch asks for FSDP; parallelism_config, the mesh's sizes the
// launch gave (dp_replicate_size, dp_shard_size, cp_size, tp_size).
void push_launch_settings(lua_State* L, const LaunchOptions& options);

}  // namespace accel::lua
