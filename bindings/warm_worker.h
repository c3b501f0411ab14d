// A warm worker (accel-run --watch, repl, serve): it joins the process
// group once, then serves the launcher's commands over its control socket
// (engine/protocol/warm_protocol.h) without ending. A run gets a new Lua
// state (worker_state.h) and a process reset to how a new one starts, so it
// equals a cold run; a served run (accel-run serve) runs the recipe and
// arguments it names, in its submitter's folder, writing to the streams
// sent with it, from a state made (accel loaded) while the worker waited.
// REPL chunks share one session's state, and Ctrl-C interrupts a chunk.
#pragma once
#include <string>

namespace accel {
struct CommunicatorOptions;
struct LaunchOptions;
}  // namespace accel

namespace accel::lua {

// Serves commands until the launcher closes `control_fd`, then ends the process.
[[noreturn]] void serve_warm_commands(const LaunchOptions& options, CommunicatorOptions* comm_options,
                                      const std::string& lua_dir, int control_fd);

}  // namespace accel::lua
