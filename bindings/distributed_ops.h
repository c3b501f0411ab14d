// The accel.core.dist table: process state, collectives, gradient sync.
#pragma once

extern "C" {
#include <lua.h>
}

#include <cstdint>
#include <memory>
#include <vector>

#include "bindings/registration.h"

namespace at {
class Tensor;
}

namespace accel {
class Communicator;
struct CollectiveCounts;
struct CommunicatorOptions;
struct ProcessState;
}

namespace accel::lua {

// Reads the process state from the environment and pushes the dist table.
// The communicator itself is created on first use.
void open_distributed(lua_State* L, const CommunicatorOptions& options);

// This process's communicator (made on first use); objects that use it
// hold it, since Lua finalizers run in no particular order at close.
std::shared_ptr<Communicator> shared_communicator(lua_State* L);

// From now on the communicator outlives the Lua state that made it: the
// next state opened in this process starts with it, process group joined
// (a warm worker of accel-run --watch runs each recipe in a new state).
void keep_communicator_between_states();

// The collectives this process's communicator has run; 0 before it exists.
// Only for a kept communicator, which outlives its states.
int64_t kept_communicator_collectives();

// accel.core.dist.ShardedModel (sharding_ops.cpp), installed in the same table.
std::vector<Binding> sharding_bindings();

// accel.core.dist.device_mesh and new_group (process_group_ops.cpp), in the
// same table; the groups they make use these.
std::vector<Binding> process_group_bindings();
// The communicator of the accel.ProcessGroup at stack index `idx`; throws
// an ArgError naming `what` for anything else.
std::shared_ptr<Communicator> group_communicator_arg(lua_State* L, int idx, const char* what);
// Pushes a communicator's (or a group's) collective counts as a table.
Pushed push_collective_counts(lua_State* L, const CollectiveCounts& c);
const ProcessState& dist_process_state(lua_State* L);
const CommunicatorOptions& dist_communicator_options(lua_State* L);
// Pushes a GradientReducer (the handle accel.core.dist.GradientReducer
// returns) averaging over `comm`, which it keeps alive.
void push_gradient_reducer(lua_State* L, std::shared_ptr<Communicator> comm, std::vector<at::Tensor> params,
                           int64_t bucket_bytes);

}  // namespace accel::lua
