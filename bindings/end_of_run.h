// A recipe's early and successful end: what the `stop` control chunk
// (lua/accel/live/control.lua) raises once every rank has saved, instead
// of os.exit, so that the run ends as a recipe that returned does, and a
// warm worker (--watch, serve, repl) lives on for the next run or chunk.
// The error object is a value no Lua code can make (a light userdata of
// this file's); run_recipe and the REPL take it as the end of a run or
// chunk that went well, and traceback passes it on unchanged.
#pragma once

struct lua_State;

namespace accel::lua {

// accel.core.live.end_run(): raises the end of the run; never returns.
int raise_end_of_run(lua_State* L);
// Whether the value at `index` is what raise_end_of_run raised.
bool is_end_of_run(lua_State* L, int index);

}  // namespace accel::lua
