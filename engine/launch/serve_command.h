// `accel-run serve [options]` (warm workers that run the recipes sent to
// them: serve_session.h) and `accel-run submit [--id ID] RECIPE.lua [--
// ARGS]` (sends one to the serve started from the current folder, or the
// one named, streams its output and exits with its exit status).
// docs/live-runs.md.
#pragma once
#include <string>
#include <vector>

#include "engine/launch/run_command.h"

namespace accel {

// `args` are the options after "serve". Returns 2 for a bad command line
// or config, else what the serve ended with (128 + the signal that stopped it).
int run_serve_command(const std::vector<std::string>& args, const RunContext& context);

// `args` are what follows "submit". Returns the run's exit status; 1 when
// no serve takes it (saying why), 2 for a bad command line.
int run_submit_command(const std::vector<std::string>& args);

}  // namespace accel
