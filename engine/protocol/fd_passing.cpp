#include "engine/protocol/fd_passing.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace accel {
namespace {

constexpr size_t kMostFds = 8;

}  // namespace

bool send_with_fds(int socket, const std::string& text, const std::vector<int>& fds) {
  if (fds.size() > kMostFds) return false;
  size_t done = 0;
  bool attached = fds.empty();
  while (done < text.size()) {
    iovec part{const_cast<char*>(text.data() + done), text.size() - done};
    msghdr message{};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMostFds)] = {};
    if (!attached) {
      message.msg_control = control;
      message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* header = CMSG_FIRSTHDR(&message);
      header->cmsg_level = SOL_SOCKET;
      header->cmsg_type = SCM_RIGHTS;
      header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
    }
    const ssize_t n = ::sendmsg(socket, &message, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    attached = true;
    done += static_cast<size_t>(n);
  }
  return true;
}

ssize_t receive_with_fds(int socket, char* buffer, size_t size, std::vector<int>& fds) {
  iovec part{buffer, size};
  msghdr message{};
  message.msg_iov = &part;
  message.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMostFds)];
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return n;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof fd);
      fds.push_back(fd);
    }
  }
  return n;
}

}  // namespace accel
