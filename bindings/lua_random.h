// math.random and math.randomseed on a generator whose state the engine can
// save and restore (LuaJIT keeps its own out of reach), so a checkpoint
// resumes a recipe's Lua randomness exactly. Semantics are Lua 5.1's:
//   math.random()      a float in [0, 1)
//   math.random(m)     an integer in [1, m]
//   math.random(m, n)  an integer in [m, n]
// (m and n truncated to integers; an empty interval is an error), and
// math.randomseed(x) restarts the sequence from x. The generator is
// xoshiro256** seeded through splitmix64; one per process, seeded with 0
// until the recipe seeds it (accel.set_seed does).
#pragma once

extern "C" {
#include <lua.h>
}

#include <vector>

#include "bindings/registration.h"

namespace accel::lua {

// Replaces math.random and math.randomseed in L's math table.
void install_math_random(lua_State* L);

// Puts the generator back where a new process starts it (seeded with 0),
// for a warm worker's next run (accel-run --watch).
void reset_math_random();

// math_random_state() -> int64 tensor of 4 (the generator's state words)
// and set_math_random_state(t), for checkpoints.
std::vector<Binding> lua_random_bindings();

}  // namespace accel::lua
