#include "engine/launch/repl_command.h"

#include "engine/protocol/launch_options.h"

namespace accel {

int run_repl_command(const std::vector<std::string>& args, const RunContext& context) {
  return run_warm_subcommand(args, context, "repl", [](const std::string& word) {
    return "accel-run repl runs what you type; '" + word + "' is not an option";
  }, &LaunchOptions::repl);
}

}  // namespace accel
