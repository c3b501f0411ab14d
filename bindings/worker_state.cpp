#include "bindings/worker_state.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

extern "C" {
#include <lauxlib.h>
#include <lualib.h>
}

#include "bindings/accel_core.h"
#include "bindings/end_of_run.h"
#include "bindings/error_boundary.h"
#include "bindings/launch_settings.h"
#include "bindings/lua_random.h"
#include "engine/comm/communicator.h"
#include "engine/protocol/launch_options.h"
#include "engine/tracking/open_trackers.h"

namespace accel::lua {
namespace {

// What `require 'accel.core'` needs: the communicator's options and the
// launch's settings (accel.core.launch).
struct CoreSettings {
  CommunicatorOptions* comm;
  const LaunchOptions* launch;
};

int open_core(lua_State* L) {
  auto* settings = static_cast<CoreSettings*>(lua_touserdata(L, lua_upvalueindex(1)));
  return protect(L, "require 'accel.core'", [&] {
    open_accel_core(L, *settings->comm);
    push_launch_settings(L, *settings->launch);
    lua_setfield(L, -2, "launch");
    return 1;
  });
}

void set_package_path(lua_State* L, const std::string& dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  std::string path = dir + "/?.lua;" + dir + "/?/init.lua;" + lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
}

// The settings live as long as the worker (its entry's frame); the state
// keeps a copy of the two pointers.
void preload_core(lua_State* L, CommunicatorOptions* comm_options, const LaunchOptions& options) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  new (lua_newuserdata(L, sizeof(CoreSettings))) CoreSettings{comm_options, &options};
  lua_pushcclosure(L, open_core, 1);
  lua_setfield(L, -2, "accel.core");
  lua_pop(L, 2);
}

// os.exit([code]) ends the worker as the end of a recipe does: output
// flushed, then _Exit, without C's exit() running LibTorch's static
// destructors while the Lua state's communicator threads still run (and
// without a leak report under the sanitizers for the state left open).
// true and false mean success and failure, as in Lua.
int exit_worker(lua_State* L) {
  int code = EXIT_SUCCESS;
  if (lua_isboolean(L, 1)) {
    code = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
  } else if (!lua_isnoneornil(L, 1)) {
    code = static_cast<int>(luaL_checkinteger(L, 1));
  }
  tracking::close_open_trackers(code == EXIT_SUCCESS ? tracking::RunOutcome::success
                                                     : tracking::RunOutcome::failure);
  std::fflush(nullptr);
  std::_Exit(code);
}

void install_os_exit(lua_State* L) {
  lua_getglobal(L, "os");
  lua_pushcfunction(L, exit_worker);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}

// arg[0] is the recipe, arg[1..] its own arguments, as the lua command does.
void set_arg_table(lua_State* L, const LaunchOptions& options) {
  lua_createtable(L, static_cast<int>(options.recipe_args.size()), 1);
  lua_pushstring(L, options.recipe.c_str());
  lua_rawseti(L, -2, 0);
  for (size_t i = 0; i < options.recipe_args.size(); ++i) {
    lua_pushstring(L, options.recipe_args[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setglobal(L, "arg");
}

// Strict globals, as Lua's strict.lua: a typo such as `modle` for `model`
// fails where it is made instead of reading nil. Reading a global nobody
// assigned is an error, and so is creating a global inside a function;
// assignments at the top level of a chunk (or from C) declare the name.
// Upvalue 1 of both metamethods is the table of declared names.
// What kind of function touched the global: "main" (a chunk's top level),
// "Lua" (inside a function) or "C".
const char* caller_kind(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 1, &ar)) return "C";
  lua_getinfo(L, "S", &ar);
  return ar.what;
}

const char* global_name(lua_State* L) {
  return lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : luaL_typename(L, 2);
}

bool is_declared(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  bool declared = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return declared;
}

int strict_index(lua_State* L) {
  if (!is_declared(L) && std::strcmp(caller_kind(L), "C") != 0) {
    return luaL_error(L, "undefined global '%s'", global_name(L));
  }
  lua_pushnil(L);
  return 1;
}

int strict_newindex(lua_State* L) {
  if (!is_declared(L)) {
    const char* kind = caller_kind(L);
    if (std::strcmp(kind, "main") != 0 && std::strcmp(kind, "C") != 0) {
      return luaL_error(L,
                        "assignment to undeclared global '%s' inside a function (make it local, "
                        "or assign it once at the top level of the recipe)",
                        global_name(L));
    }
    lua_pushvalue(L, 2);
    lua_pushboolean(L, 1);
    lua_rawset(L, lua_upvalueindex(1));
  }
  lua_rawset(L, 1);
  return 0;
}

void make_globals_strict(lua_State* L) {
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_newtable(L);  // the metatable
  lua_newtable(L);  // declared names, shared by both metamethods
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, strict_index, 1);
  lua_setfield(L, -3, "__index");
  lua_pushcclosure(L, strict_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

}  // namespace

int traceback(lua_State* L) {
  if (is_end_of_run(L, 1)) return 1;
  if (!lua_isstring(L, 1)) {  // error(non-string): describe it rather than lose it
    lua_getglobal(L, "tostring");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    lua_replace(L, 1);
  }
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

bool load_accel(lua_State* L, int error_handler) {
  lua_getglobal(L, "require");
  lua_pushliteral(L, "accel");
  if (lua_pcall(L, 1, 1, error_handler) != 0) return false;
  lua_setglobal(L, "accel");
  make_globals_strict(L);
  return true;
}

bool run_recipe(lua_State* L, const std::string& recipe, bool accel_loaded) {
  lua_pushcfunction(L, traceback);
  int handler = lua_gettop(L);
  if (!accel_loaded && !load_accel(L, handler)) return false;
  // As Lua source only: LuaJIT runs bytecode unverified, and a recipe is
  // text its user wrote (a load error's message names file and line).
  if (luaL_loadfilex(L, recipe.c_str(), "t") != 0) {
    if (std::strstr(lua_tostring(L, -1), "wrong mode")) {
      lua_pop(L, 1);
      lua_pushstring(L, (recipe + " is compiled Lua bytecode; accel-run runs recipes as Lua source only").c_str());
    }
    return false;
  }
  if (lua_pcall(L, 0, 0, handler) != 0) {
    if (!is_end_of_run(L, -1)) return false;
    lua_pop(L, 1);
  }
  lua_getglobal(L, "require");
  lua_pushliteral(L, "accel.core");
  if (lua_pcall(L, 1, 1, handler) != 0) return false;
  lua_getfield(L, -1, "dist");
  lua_getfield(L, -1, "finish");
  return lua_pcall(L, 0, 0, handler) == 0;
}

void set_recipe_arguments(lua_State* L, const LaunchOptions& options) { set_arg_table(L, options); }

// A Lua state ready for the recipe: libraries, accel.core preloaded, arg.
lua_State* new_worker_state(const LaunchOptions& options, CommunicatorOptions* comm_options,
                            const std::string& lua_dir) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  install_math_random(L);  // a generator checkpoints can save
  install_os_exit(L);
  set_package_path(L, lua_dir);
  preload_core(L, comm_options, options);
  set_arg_table(L, options);
  return L;
}

}  // namespace accel::lua
