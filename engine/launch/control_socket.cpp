#include "engine/launch/control_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "engine/launch/errno_error.h"

namespace accel {
namespace {

// Compares without an early exit, so refusals take as long whatever the
// guess (as the store's HELLO does).
bool same_secret(const std::string& given, const std::string& secret) {
  unsigned char diff = given.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i) {
    diff |= static_cast<unsigned char>(given[i] ^ secret[i % secret.size()]);
  }
  return diff == 0;
}

}  // namespace

int listen_owner_only(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof address.sun_path) {
    throw std::runtime_error("the control socket's path " + path + " is too long for a Unix socket");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  ::unlink(path.c_str());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw_errno("cannot create the control socket");
  // Owner-only before anyone can connect: the umask decides the socket
  // file's mode at bind.
  const mode_t old_mask = ::umask(077);
  const int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::umask(old_mask);
  if (bound != 0 || ::chmod(path.c_str(), 0600) != 0 || ::listen(fd, 16) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    throw_errno("cannot listen on " + path);
  }
  return fd;
}

bool readable(int fd, int wake_fd, int timeout_ms) {
  pollfd fds[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
  int n;
  do {
    n = ::poll(fds, 2, timeout_ms);
  } while (n < 0 && errno == EINTR);
  return n > 0 && fds[1].revents == 0 && fds[0].revents != 0;
}

void send_all(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

bool peer_is_owner(int fd) {
  ucred peer{};
  socklen_t size = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) == 0 && peer.uid == ::geteuid()) return true;
  send_all(fd, "refused: this run belongs to another user\n");
  return false;
}

bool accept_hello(int fd, int wake_fd, const std::string& secret, std::chrono::milliseconds timeout) {
  // Byte by byte up to the line's end: what follows it may come with
  // descriptors attached (fd_passing.h), which a longer read would drop.
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (line.empty() || line.back() != '\n') {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || line.size() > 1024 || !readable(fd, wake_fd, static_cast<int>(left.count()))) {
      return false;
    }
    char c;
    if (::recv(fd, &c, 1, 0) != 1) return false;
    line += c;
  }
  line.pop_back();
  if (line.rfind("hello ", 0) != 0 || !same_secret(line.substr(6), secret)) {
    send_all(fd, "refused: wrong secret (accel-run attach, ctl and submit read it from the run's folder)\n");
    return false;
  }
  send_all(fd, "ok\n");
  return true;
}

}  // namespace accel
