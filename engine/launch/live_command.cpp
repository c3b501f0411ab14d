#include "engine/launch/live_command.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "engine/launch/control_client.h"
#include "engine/launch/live_run_folder.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

int list_runs(std::ostream& out) {
  for (const LiveRunEntry& run : live_runs()) {
    out << run.id << "  pid " << run.pid << "  " << run.cwd << "  " << run.recipe << "\n";
  }
  return 0;
}

std::string current_folder() {
  std::error_code ignored;
  return std::filesystem::current_path(ignored).string();
}

}  // namespace

int run_live_command(const std::string& verb, const std::vector<std::string>& args, std::istream& in,
                     std::ostream& out, std::ostream& err) {
  const bool ctl = verb == "ctl";
  const size_t most = ctl ? 2 : 1;
  if (args.size() > most || (ctl && args.empty()) || (!args.empty() && (args[0] == "-h" || args[0] == "--help"))) {
    (args.empty() || args[0].rfind("-", 0) != 0 ? err : out)
        << "usage: accel-run attach [RUN] | accel-run attach --list | accel-run ctl [RUN] 'CHUNK'\n";
    return args.size() == 1 && args[0].rfind("-h", 0) == 0 ? 0 : 2;
  }
  try {
    if (!ctl && args.size() == 1 && args[0] == "--list") return list_runs(out);
    const std::string id = args.size() == most ? args[0] : "";
    ControlClient client(find_live_run(id, current_folder()));
    if (ctl) {
      const WarmMessage reply = client.ask({"chunk", args.back()});
      out << reply.text << std::flush;
      return reply.kind == WarmMessage::Kind::ok ? 0 : 1;
    }
    const bool prompt = ::isatty(STDIN_FILENO);
    if (prompt) err << "accel-run: attached; each line runs on every rank at the next step boundary; Ctrl-D leaves\n";
    std::string line;
    for (;;) {
      if (prompt) err << "live> " << std::flush;
      if (!std::getline(in, line)) break;
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      out << client.ask({"chunk", line}).text << std::flush;
    }
    return 0;
  } catch (const std::exception& error) {
    err << "accel-run: error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace accel
