// Running a recipe: what `accel-run RECIPE.lua` does once its options are
// known. One round starts this machine's workers (after meeting the other
// nodes' launchers when there are several), supervises them, reports
// stalled collectives while they run and the failure report when they end.
// After a failure, with --max-restarts K, all workers start again in a new
// round, up to K times; ACCEL_RESTART_COUNT tells them which start it is, so
// a recipe can resume from its newest checkpoint. A launcher interrupted by
// a signal does not restart. Under --watch (and for `accel-run repl`) a
// round's workers are warm ones, driven by the session's controller
// (warm_session.h); a set of them that ends is replaced by a new one until
// the session is over.
#pragma once
#include <unistd.h>

#include <string>
#include <vector>

#include "engine/protocol/launch_options.h"

namespace accel {

struct RunContext {
  std::string accel_run;         // this program's path: workers' argv[0], and what mpirun starts
  // What the launcher executes for a worker: /proc/self/exe stays this very
  // binary even if the file is rebuilt or moved while the run goes on.
  std::string worker_program = "/proc/self/exe";
  std::vector<std::string> env;  // the launcher's environment, passed on to the workers
  int stdout_fd = STDOUT_FILENO;
  int stderr_fd = STDERR_FILENO;
};

// Runs options.recipe; returns the launcher's exit code: 0, the culprit's
// exit code (128 + signal for a signal), 1 when the nodes did not meet, or 2
// when a run of several nodes has no store token (--rdzv-token, else
// ACCEL_RDZV_TOKEN in context.env; a single node's launcher generates one).
int run_recipe(const LaunchOptions& options, const RunContext& context);

// What `accel-run repl` and `accel-run serve` share: `args` (the options
// after the subcommand `name`) resolved without a recipe, refused beyond one
// machine over gloo or with --watch or --max-restarts, then warm workers
// started with `mode` set in the options. `no_recipe(word)` is the error for
// a word that is neither an option nor theirs to take. Returns 0 after
// --help, 2 for a bad command line or config, else what run_recipe returns.
int run_warm_subcommand(const std::vector<std::string>& args, const RunContext& context, const std::string& name,
                        std::string (*no_recipe)(const std::string& word), bool LaunchOptions::*mode);

}  // namespace accel
