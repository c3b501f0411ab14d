#include "engine/launch/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "engine/protocol/fd_passing.h"

namespace accel {

ControlClient::ControlClient(const LiveRunEntry& run) {
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
    const int error = errno;
    if (fd_ >= 0) ::close(fd_);
    throw std::runtime_error("cannot connect to run " + run.id + " (" + path + "): " + std::strerror(error) +
                             " (is it still starting, or a --watch or MPI run, which take no chunks?)");
  }
  send("hello " + secret.str() + "\n");
  std::string answer;
  char c;
  while (::recv(fd_, &c, 1, 0) == 1 && c != '\n') answer += c;
  if (answer != "ok") {
    ::close(fd_);
    throw std::runtime_error("run " + run.id + " refused the connection: " + answer);
  }
}

ControlClient::~ControlClient() {
  if (fd_ >= 0) ::close(fd_);
}

WarmMessage ControlClient::ask(const WarmCommand& command, const std::vector<int>& fds) {
  send(encode_warm_command(command), fds);
  for (;;) {
    if (std::optional<WarmMessage> message = reader_.next_message()) return *message;
    char buffer[4096];
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error("the run ended before it answered");
    reader_.feed(buffer, static_cast<size_t>(n));
  }
}

void ControlClient::send(const std::string& text, const std::vector<int>& fds) {
  if (!send_with_fds(fd_, text, fds)) {
    throw std::runtime_error(std::string("cannot write to the control socket: ") + std::strerror(errno));
  }
}

}  // namespace accel
