// accel.core.profiler: LibTorch's profiler (engine/profiler.h) as a Lua
// value, for lua/accel/profiling.lua, which keeps the schedule.
#include <memory>

#include "bindings/op_tables.h"
#include "bindings/option_table.h"
#include "engine/profiler.h"

namespace accel::lua {
namespace {

using ProfilerPtr = std::unique_ptr<Profiler>;

std::vector<Binding> profiler_methods();

const HandleType kProfiler{"accel.Profiler", "Profiler:", profiler_methods};

Profiler& profiler_at(lua_State* L) { return *check_handle<ProfilerPtr>(L, 1, kProfiler); }

std::vector<Binding> profiler_methods() {
  return {
      bind("warm_up", [](lua_State* L, Receiver) { profiler_at(L).warm_up(); }),
      bind("start", [](lua_State* L, Receiver) { profiler_at(L).start(); }),
      // stop(path) -> the number of events written to path
      bind("stop", [](lua_State* L, Receiver, std::string path) {
        return static_cast<int64_t>(profiler_at(L).stop(path));
      }),
      bind("discard", [](lua_State* L, Receiver) { profiler_at(L).discard(); }),
      bind("recording", [](lua_State* L, Receiver) { return profiler_at(L).recording(); }),
  };
}

}  // namespace

std::vector<Binding> profiler_bindings() {
  return {
      // new({cpu, cuda, record_shapes, profile_memory, with_stack, with_flops}), all booleans
      bind("new", [](lua_State* L, Options o) {
        check_option_names(L, o, {"cpu", "cuda", "record_shapes", "profile_memory", "with_stack", "with_flops"});
        ProfilerOptions options;
        options.cpu = option_boolean(L, o, "cpu", true);
        options.cuda = option_boolean(L, o, "cuda", false);
        options.record_shapes = option_boolean(L, o, "record_shapes", false);
        options.profile_memory = option_boolean(L, o, "profile_memory", false);
        options.with_stack = option_boolean(L, o, "with_stack", false);
        options.with_flops = option_boolean(L, o, "with_flops", false);
        push_handle(L, kProfiler, std::make_unique<Profiler>(options));
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
