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

#include "engine/launch/live_run_folder.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

// A connection to a run's control socket, past its hello.
class ControlClient {
 public:
  explicit ControlClient(const LiveRunEntry& run) {
    std::ifstream secret_file(run.folder + "/secret");
    std::stringstream secret;
    secret << secret_file.rdbuf();
    if (!secret_file) throw std::runtime_error("cannot read the secret of run " + run.id + " in " + run.folder);
    const std::string path = run.folder + "/control.sock";
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path.size() >= sizeof address.sun_path) throw std::runtime_error("the socket path " + path + " is too long");
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
      throw std::runtime_error("cannot connect to run " + run.id + " (" + path + "): " + std::strerror(errno) +
                               " (is it still starting, or a --watch or MPI run, which take no chunks?)");
    }
    send("hello " + secret.str() + "\n");
    std::string answer;
    char c;
    while (::recv(fd_, &c, 1, 0) == 1 && c != '\n') answer += c;
    if (answer != "ok") throw std::runtime_error("run " + run.id + " refused the connection: " + answer);
  }
  ~ControlClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  WarmMessage ask(const std::string& chunk) {
    send(encode_warm_command({"chunk", chunk}));
    for (;;) {
      if (std::optional<WarmMessage> message = reader_.next_message()) return *message;
      char buffer[4096];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) throw std::runtime_error("the run ended before it answered");
      reader_.feed(buffer, static_cast<size_t>(n));
    }
  }

 private:
  void send(const std::string& text) {
    for (size_t done = 0; done < text.size();) {
      const ssize_t n = ::send(fd_, text.data() + done, text.size() - done, MSG_NOSIGNAL);
      if (n <= 0) throw std::runtime_error(std::string("cannot write to the control socket: ") + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }
  int fd_ = -1;
  WarmFrameReader reader_;
};

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
      const WarmMessage reply = client.ask(args.back());
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
      out << client.ask(line).text << std::flush;
    }
    return 0;
  } catch (const std::exception& error) {
    err << "accel-run: error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace accel
