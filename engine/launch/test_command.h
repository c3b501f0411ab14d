// `accel-run test`: runs the built-in check of every collective (all_reduce
// sum, mean and max, broadcast, all_gather, barrier, gradient reduction) on
// the ranks the options and config give, as any recipe runs. The recipe,
// lua/accel/commands/selftest.lua, prints one pass/fail line per check; this adds a
// last line with the verdict.
#pragma once
#include <string>
#include <vector>

#include "engine/launch/run_command.h"

namespace accel {

// The path of the built-in check recipe under `lua_dir`.
std::string selftest_recipe(const std::string& lua_dir);

// `args` are the options after "test". Returns 0 when every check passed on
// every rank, 2 for a bad command line or config, else the run's exit code.
int run_test_command(const std::vector<std::string>& args, const RunContext& context,
                     const std::string& lua_dir);

}  // namespace accel
