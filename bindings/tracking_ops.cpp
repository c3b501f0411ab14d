// accel.core.tracking: the engine's trackers (engine/tracking/) as Lua
// values, for lua/accel/tracking.lua. Lua flattens what a recipe logs into
// {name = number} first; these read that table straight off the stack.
#include <algorithm>
#include <memory>

#include "bindings/op_tables.h"
#include "engine/tracking/event_file_writer.h"
#include "engine/tracking/jsonl_tracker.h"
#include "engine/tracking/tracker.h"

namespace accel::lua {
namespace {

using TrackerPtr = std::unique_ptr<tracking::Tracker>;

std::vector<Binding> tracker_methods();

const HandleType kTracker{"accel.Tracker", "Tracker:", tracker_methods};

tracking::Tracker& tracker_at(lua_State* L) {
  TrackerPtr& tracker = check_handle<TrackerPtr>(L, 1, kTracker);
  return *tracker;
}

// The kinds Accelerator{log_with = ...} names, and what makes each.
struct TrackerKind {
  const char* name;
  TrackerPtr (*make)(const std::string& run_dir, double flush_seconds);
};
const TrackerKind kKinds[] = {
    {"jsonl", [](const std::string& dir, double s) -> TrackerPtr {
       return std::make_unique<tracking::JsonlTracker>(dir, s);
     }},
    {"tensorboard", [](const std::string& dir, double s) -> TrackerPtr {
       return std::make_unique<tracking::EventFileWriter>(dir, s);
     }},
};

std::string key_at(lua_State* L, int index, const char* what) {
  if (lua_type(L, index) != LUA_TSTRING) {
    throw ArgError(std::string(what) + " must be strings, got a " + type_name_at(L, index));
  }
  size_t size = 0;
  const char* text = lua_tolstring(L, index, &size);
  return std::string(text, size);
}

// The table at `index`, {name = number}, sorted by name so every line and
// event lists the same metrics in the same order. One vector serves every
// call: logging each step allocates nothing once it has grown.
const tracking::Scalars& read_scalars(lua_State* L, int index) {
  static tracking::Scalars scalars;
  scalars.clear();
  luaL_checktype(L, index, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    std::string name = key_at(L, -2, "metric names");
    if (lua_type(L, -1) != LUA_TNUMBER) {
      throw ArgError("metric '" + name + "' must be a number, got a " + type_name_at(L, -1));
    }
    scalars.emplace_back(std::move(name), lua_tonumber(L, -1));
    lua_pop(L, 1);
  }
  std::sort(scalars.begin(), scalars.end());
  return scalars;
}

tracking::Config read_config(lua_State* L, int index) {
  tracking::Config config;
  luaL_checktype(L, index, LUA_TTABLE);
  lua_pushnil(L);
  while (lua_next(L, index) != 0) {
    std::string key = key_at(L, -2, "config keys");
    switch (lua_type(L, -1)) {
      case LUA_TNUMBER: config.emplace_back(key, lua_tonumber(L, -1)); break;
      case LUA_TBOOLEAN: config.emplace_back(key, static_cast<bool>(lua_toboolean(L, -1))); break;
      case LUA_TSTRING: config.emplace_back(key, key_at(L, -1, "config values")); break;
      default:
        throw ArgError("config key '" + key + "' holds a " + type_name_at(L, -1) +
                       "; hyperparameters are numbers, booleans or strings");
    }
    lua_pop(L, 1);
  }
  std::sort(config.begin(), config.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return config;
}

std::vector<Binding> tracker_methods() {
  return {
      // log(step, {name = number})
      bind("log", [](lua_State* L, Receiver, int64_t step) { tracker_at(L).log(step, read_scalars(L, 3)); }),
      // log_config({key = number | boolean | string})
      bind("log_config", [](lua_State* L, Receiver) { tracker_at(L).log_config(read_config(L, 2)); }),
      bind("flush", [](lua_State* L, Receiver) { tracker_at(L).flush(); }),
      // close([failed]): TensorBoard records the session's status.
      bind("close", [](lua_State* L, Receiver, c10::optional<bool> failed) {
        tracker_at(L).close(failed.value_or(false) ? tracking::RunOutcome::failure
                                                   : tracking::RunOutcome::success);
      }),
      bind("path", [](lua_State* L, Receiver) { return tracker_at(L).path(); }),
  };
}

}  // namespace

std::vector<Binding> tracking_bindings() {
  return {
      // check_run_name(name): raises unless name can be a run's folder in project_dir.
      bind("check_run_name", [](std::string name) { tracking::check_run_name(name); }),
      // open(kind, run_dir[, flush_seconds]): kind is "jsonl" or "tensorboard".
      bind("open", [](lua_State* L, std::string kind, std::string run_dir, c10::optional<double> flush_seconds) {
        for (const TrackerKind& k : kKinds) {
          if (kind == k.name) {
            push_handle(L, kTracker, k.make(run_dir, flush_seconds.value_or(5.0)));
            return Pushed{1};
          }
        }
        throw ArgError("unknown tracker '" + kind + "' (known: jsonl, tensorboard)");
      }),
  };
}

}  // namespace accel::lua
