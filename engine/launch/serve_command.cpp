#include "engine/launch/serve_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "engine/launch/control_client.h"
#include "engine/launch/live_run_folder.h"
#include "engine/protocol/launch_options.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {

int run_serve_command(const std::vector<std::string>& args, const RunContext& context) {
  return run_warm_subcommand(args, context, "serve", [](const std::string& word) {
    return "accel-run serve runs the recipes submitted to it (accel-run submit " + word + "); '" + word +
           "' is not an option";
  }, &LaunchOptions::serve);
}

namespace {

constexpr const char* kSubmitUsage = "usage: accel-run submit [--id ID] RECIPE.lua [-- ARGS...]\n";

}  // namespace

int run_submit_command(const std::vector<std::string>& args) {
  std::string id;
  RunRequest request;
  size_t i = 0;
  for (; i < args.size() && request.recipe.empty(); ++i) {
    if (args[i] == "-h" || args[i] == "--help") {
      std::fputs(kSubmitUsage, stdout);
      std::fputs("Runs RECIPE.lua on the warm workers of an accel-run serve: the one started from this\n"
                 "folder, or the one whose id --id gives. Its output comes here; the exit status is the\n"
                 "run's. The serve's options (--nproc, --mixed-precision, ...) are the run's.\n", stdout);
      return 0;
    }
    if (args[i] == "--id" && i + 1 < args.size()) {
      id = args[++i];
    } else if (args[i].rfind("--id=", 0) == 0) {
      id = args[i].substr(5);
    } else if (args[i].rfind("-", 0) == 0) {
      std::fprintf(stderr, "accel-run: error: submit takes --id ID and the recipe; '%s' is not one (the recipe's "
                           "own arguments follow --)\n%s", args[i].c_str(), kSubmitUsage);
      return 2;
    } else {
      request.recipe = args[i];
    }
  }
  if (request.recipe.empty()) {
    std::fputs(kSubmitUsage, stderr);
    return 2;
  }
  if (i < args.size()) {
    if (args[i] != "--") {
      std::fprintf(stderr, "accel-run: error: the recipe's arguments follow --; '%s' comes before it\n%s",
                   args[i].c_str(), kSubmitUsage);
      return 2;
    }
    request.args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  }
  // Checked here so a typo fails at once rather than in every rank.
  if (::access(request.recipe.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "accel-run: error: cannot read the recipe '%s': %s\n", request.recipe.c_str(),
                 std::strerror(errno));
    return 2;
  }
  std::error_code ignored;
  request.cwd = std::filesystem::current_path(ignored).string();
  try {
    ControlClient serve(find_live_run(id, request.cwd, "serve"));
    const WarmMessage outcome = serve.ask({"submit", encode_run_request(request)}, {STDOUT_FILENO, STDERR_FILENO});
    if (!outcome.text.empty()) std::fputs(outcome.text.c_str(), stderr);
    return static_cast<int>(outcome.number);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 1;
  }
}

}  // namespace accel
