// `accel-run repl [options]`: the interactive prompt of repl_controller.h on
// the ranks the options and config give (one machine, the gloo backend).
#pragma once
#include <string>
#include <vector>

#include "engine/launch/run_command.h"

namespace accel {

// `args` are the options after "repl". Returns 0 when the user left, 2 for
// a bad command line or config, else 128 + the signal that ended it.
int run_repl_command(const std::vector<std::string>& args, const RunContext& context);

}  // namespace accel
