#include "engine/launch/repl_command.h"

#include <cstdio>

#include "engine/protocol/launch_options.h"

namespace accel {

int run_repl_command(const std::vector<std::string>& args, const RunContext& context) {
  LaunchOptions options;
  try {
    options = resolve_launch_options(args, ConfigLookup::from_environment(), usable_cpu_cores(),
                                     RecipeRule::none);
    if (!options.recipe.empty()) {
      throw LaunchOptionsError("accel-run repl runs what you type; '" + options.recipe + "' is not an option");
    }
    if (options.nnodes > 1 || options.backend == "mpi" || options.watch || options.max_restarts > 0) {
      throw LaunchOptionsError(
          "accel-run repl runs on one machine over gloo, without --watch or --max-restarts");
    }
  } catch (const LaunchOptionsError& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 2;
  }
  if (options.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  // The workers' command line names a recipe they never run.
  options.recipe = "repl";
  options.repl = true;
  return run_recipe(options, context);
}

}  // namespace accel
