// Feeds the input to accel.serialize.load, the decoder of checkpoint value
// files (the Accelerator's state, schedulers, loader positions, registered
// objects) and of gather_object payloads from peers. The decoder is Lua:
// lua_harness.h gives libFuzzer its coverage.
// Finding: an error that is not the decoder's own ("accel.serialize: ..."),
// a crash, a sanitizer report, a hang or a leak; also a decoded value that
// serialize.dump refuses, or whose bytes do not read back to the same bytes.
#include <cstring>
#include <string>

#include "tests/fuzz/lua_harness.h"

using accel::fuzz::call_lua;

namespace {

constexpr const char* kTarget = "fuzz_value_file";

[[noreturn]] void finding(const std::string& what) { accel::fuzz::lua_finding(kTarget, what); }

// serialize.load and serialize.dump, left in the registry.
constexpr const char* kSetup = R"(
local serialize = require('accel.serialize')
local registry = debug.getregistry()
registry['fuzz.load'], registry['fuzz.dump'] = serialize.load, serialize.dump
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = accel::fuzz::new_lua_state(kTarget, kSetup);
  lua_pushlstring(L, reinterpret_cast<const char*>(data), size);
  if (!call_lua(L, "fuzz.load")) {
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
  if (!call_lua(L, "fuzz.dump")) finding(std::string("dump refused a decoded value: ") + lua_tostring(L, -1));
  const std::string first = lua_tostring(L, -1);
  if (!call_lua(L, "fuzz.load")) finding(std::string("load refused dump's bytes: ") + lua_tostring(L, -1));
  if (!call_lua(L, "fuzz.dump")) finding(std::string("dump refused a value it wrote: ") + lua_tostring(L, -1));
  if (first != lua_tostring(L, -1)) finding("dump(load(dump(value))) differs from dump(value)");
  lua_settop(L, 0);
  // What this input made is freed before it ends, so that libFuzzer's leak
  // check (mallocs against frees per input) sees leaks and not Lua's garbage.
  lua_gc(L, LUA_GCCOLLECT, 0);
  return 0;
}
