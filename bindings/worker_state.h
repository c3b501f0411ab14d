// The Lua state a recipe runs in: the standard libraries, a savable
// math.random, os.exit that ends the worker cleanly, accel.core preloaded
// (with the launch's settings as accel.core.launch), `arg`, and, once
// accel is loaded, strict globals. A cold worker runs one recipe in it; a
// warm worker makes a new one per run (warm_worker.h).
#pragma once
#include <string>

extern "C" {
#include <lua.h>
}

namespace accel {
struct CommunicatorOptions;
struct LaunchOptions;
}  // namespace accel

namespace accel::lua {

// `options` and `comm_options` must outlive the state.
lua_State* new_worker_state(const LaunchOptions& options, CommunicatorOptions* comm_options,
                            const std::string& lua_dir);

// Loads accel (as the global `accel` too) and makes the globals strict.
// Returns false with the error on the stack.
bool load_accel(lua_State* L, int error_handler);

// Loads accel (unless `accel_loaded`: load_accel ran already), runs the
// recipe, then accel.core.dist.finish. On failure the error with its
// traceback is on the stack.
bool run_recipe(lua_State* L, const std::string& recipe, bool accel_loaded = false);

// Sets `arg` to options.recipe and its arguments: for a state made before
// its recipe was known (warm_worker.h).
void set_recipe_arguments(lua_State* L, const LaunchOptions& options);

// A message handler for lua_pcall: the error (described when it is not a
// string) with Lua's traceback.
int traceback(lua_State* L);

}  // namespace accel::lua
