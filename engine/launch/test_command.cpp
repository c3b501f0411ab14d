#include "engine/launch/test_command.h"

#include <unistd.h>

#include <cstdio>

#include "engine/protocol/launch_options.h"

namespace accel {

std::string selftest_recipe(const std::string& lua_dir) { return lua_dir + "/accel/commands/selftest.lua"; }

int run_test_command(const std::vector<std::string>& args, const RunContext& context,
                     const std::string& lua_dir) {
  LaunchOptions options;
  try {
    options = resolve_launch_options(args, ConfigLookup::from_environment(), usable_cpu_cores(),
                                     RecipeRule::none);
  } catch (const LaunchOptionsError& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 2;
  }
  if (!options.recipe.empty()) {
    std::fprintf(stderr, "accel-run: error: accel-run test runs its own recipe; '%s' is not an option\n",
                 options.recipe.c_str());
    return 2;
  }
  options.recipe = selftest_recipe(lua_dir);
  if (::access(options.recipe.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "accel-run: error: the built-in check %s is missing\n", options.recipe.c_str());
    return 2;
  }
  int code = run_recipe(options, context);
  std::string verdict = "accel-run test: " + std::string(code == 0 ? "passed" : "FAILED") + " on " +
                        std::to_string(options.nproc * options.nnodes) +
                        (options.nproc * options.nnodes == 1 ? " rank" : " ranks") + " (backend " +
                        options.backend + (options.debug ? ", debug" : "") + ")\n";
  [[maybe_unused]] ssize_t written = ::write(context.stdout_fd, verdict.data(), verdict.size());
  return code;
}

}  // namespace accel
