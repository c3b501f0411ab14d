// What the fuzz targets of Lua modules share (fuzz_value_file.cpp,
// fuzz_sharded_layout.cpp): libFuzzer's compiler instrumentation cannot see
// Lua, so a line hook gives libFuzzer its coverage: each pair of consecutive
// Lua lines run bumps one of the extra counters libFuzzer reads from the
// __libfuzzer_extra_counters section. The JIT is off so that every line
// reaches the hook. accel.core is preloaded and package.path points at the
// project's Lua modules.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
}

#include "bindings/accel_core.h"
#include "engine/comm/communicator.h"

namespace accel::fuzz {

constexpr size_t kLuaCounters = 1 << 16;
// libFuzzer treats every byte of this section as one more coverage counter.
__attribute__((section("__libfuzzer_extra_counters"))) inline uint8_t lua_line_counters[kLuaCounters];

inline void count_lua_line(lua_State* L, lua_Debug* ar) {
  static uintptr_t previous = 0;
  lua_getinfo(L, "S", ar);
  // Sources are interned strings that live as long as their chunks, which
  // require() keeps: the pointer names the file for the whole run.
  const uintptr_t here = reinterpret_cast<uintptr_t>(ar->source) * 31 + static_cast<uintptr_t>(ar->currentline);
  uint8_t& counter = lua_line_counters[(here ^ (previous << 1)) % kLuaCounters];
  if (counter < 255) ++counter;
  previous = here;
}

// Ends the run as a finding of `target`, saying what.
[[noreturn]] inline void lua_finding(const char* target, const std::string& what) {
  std::fprintf(stderr, "%s: %s\n", target, what.c_str());
  std::abort();
}

inline int open_core(lua_State* L) {
  static const accel::CommunicatorOptions options;
  return accel::lua::open_accel_core(L, options);
}

// A state with accel.core preloaded and package.path on the project's Lua
// modules; `setup` (a chunk) runs first and leaves in the registry the
// functions the target calls; then the line hook is set.
inline lua_State* new_lua_state(const char* target, const std::string& setup) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  const std::string chunk = std::string("package.path = '") + ACCEL_LUA_DIR + "/?.lua;" + ACCEL_LUA_DIR +
                            "/?/init.lua;' .. package.path";
  if (luaL_dostring(L, chunk.c_str()) != 0) lua_finding(target, lua_tostring(L, -1));
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, open_core);
  lua_setfield(L, -2, "accel.core");
  lua_settop(L, 0);
  if (luaL_dostring(L, setup.c_str()) != 0) lua_finding(target, lua_tostring(L, -1));
  lua_settop(L, 0);
  lua_sethook(L, count_lua_line, LUA_MASKLINE, 0);
  return L;
}

// Calls registry[function_name](argument at the top); leaves one result
// or the error message. Returns whether it succeeded.
inline bool call_lua(lua_State* L, const char* function_name) {
  lua_getfield(L, LUA_REGISTRYINDEX, function_name);
  lua_insert(L, -2);
  return lua_pcall(L, 1, 1, 0) == 0;
}

// One input to a check written in Lua: registry[function_name](input)
// returns nil when the input was handled as promised, else what went wrong
// (a finding, as is an error escaping the check itself).
inline int check_input(lua_State* L, const char* target, const char* function_name, const uint8_t* data,
                       size_t size) {
  lua_pushlstring(L, reinterpret_cast<const char*>(data), size);
  if (!call_lua(L, function_name)) lua_finding(target, std::string("the harness failed: ") + lua_tostring(L, -1));
  if (lua_isstring(L, -1)) lua_finding(target, lua_tostring(L, -1));
  lua_settop(L, 0);
  // What this input made is freed before it ends, so that libFuzzer's leak
  // check sees leaks and not Lua's garbage.
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}

}  // namespace accel::fuzz
