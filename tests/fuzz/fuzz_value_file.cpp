// Feeds the input to accel.serialize.load, the decoder of checkpoint value
// files (the Accelerator's state, schedulers, loader positions, registered
// objects) and of gather_object payloads from peers. The decoder is Lua, which libFuzzer's
// compiler instrumentation cannot see, so a line hook gives libFuzzer its
// coverage: each pair of consecutive Lua lines run bumps one of the extra
// counters libFuzzer reads from the __libfuzzer_extra_counters section.
// The JIT is off so that every line reaches the hook.
// Finding: an error that is not the decoder's own ("accel.serialize: ..."),
// a crash, a sanitizer report, a hang or a leak; also a decoded value that
// serialize.dump refuses, or whose bytes do not read back to the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <luajit.h>
#include <lualib.h>
}

#include "bindings/accel_core.h"
#include "engine/comm/communicator.h"

namespace {

constexpr size_t kCounters = 1 << 16;
// libFuzzer treats every byte of this section as one more coverage counter.
__attribute__((section("__libfuzzer_extra_counters"))) uint8_t lua_line_counters[kCounters];

void count_line(lua_State* L, lua_Debug* ar) {
  static uintptr_t previous = 0;
  lua_getinfo(L, "S", ar);
  // Sources are interned strings that live as long as their chunks, which
  // require() keeps: the pointer names the file for the whole run.
  const uintptr_t here = reinterpret_cast<uintptr_t>(ar->source) * 31 + static_cast<uintptr_t>(ar->currentline);
  uint8_t& counter = lua_line_counters[(here ^ (previous << 1)) % kCounters];
  if (counter < 255) ++counter;
  previous = here;
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_value_file: %s\n", what.c_str());
  std::abort();
}

int open_core(lua_State* L) {
  static const accel::CommunicatorOptions options;
  return accel::lua::open_accel_core(L, options);
}

// A state with accel.core preloaded and package.path on the project's Lua
// modules; leaves serialize.load and serialize.dump in the registry.
lua_State* new_state() {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | LUAJIT_MODE_OFF);
  const std::string chunk = std::string("package.path = '") + ACCEL_LUA_DIR + "/?.lua;' .. package.path";
  if (luaL_dostring(L, chunk.c_str()) != 0) finding(lua_tostring(L, -1));
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, open_core);
  lua_setfield(L, -2, "accel.core");
  lua_settop(L, 0);
  if (luaL_dostring(L, "return require('accel.serialize')") != 0) finding(lua_tostring(L, -1));
  lua_getfield(L, -1, "load");
  lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.load");
  lua_getfield(L, -1, "dump");
  lua_setfield(L, LUA_REGISTRYINDEX, "fuzz.dump");
  lua_settop(L, 0);
  lua_sethook(L, count_line, LUA_MASKLINE, 0);
  return L;
}

// Calls registry[function_name](argument at the top); leaves one result
// or the error message. Returns whether it succeeded.
bool call(lua_State* L, const char* function_name) {
  lua_getfield(L, LUA_REGISTRYINDEX, function_name);
  lua_insert(L, -2);
  return lua_pcall(L, 1, 1, 0) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = new_state();
  lua_pushlstring(L, reinterpret_cast<const char*>(data), size);
  if (!call(L, "fuzz.load")) {
    const char* message = lua_tostring(L, -1);
    if (!message || std::strncmp(message, "accel.serialize: ", 17) != 0) {
      finding(std::string("load raised an error that is not the decoder's: ") + (message ? message : "(not a string)"));
    }
    lua_settop(L, 0);
    lua_gc(L, LUA_GCCOLLECT, 0);
    return 0;
  }
  // What was read is data the writer accepts, and its bytes read back to
  // the same bytes (non-canonical inputs, such as padded counts, need not).
  if (!call(L, "fuzz.dump")) finding(std::string("dump refused a decoded value: ") + lua_tostring(L, -1));
  const std::string first = lua_tostring(L, -1);
  if (!call(L, "fuzz.load")) finding(std::string("load refused dump's bytes: ") + lua_tostring(L, -1));
  if (!call(L, "fuzz.dump")) finding(std::string("dump refused a value it wrote: ") + lua_tostring(L, -1));
  if (first != lua_tostring(L, -1)) finding("dump(load(dump(value))) differs from dump(value)");
  lua_settop(L, 0);
  // What this input made is freed before it ends, so that libFuzzer's leak
  // check (mallocs against frees per input) sees leaks and not Lua's garbage.
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
