#include "engine/launch/serve_session.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <stdexcept>

#include "engine/launch/control_socket.h"
#include "engine/launch/errno_error.h"
#include "engine/launch/output_relay.h"
#include "engine/launch/serve_controller.h"
#include "engine/protocol/fd_passing.h"

namespace accel {
namespace {

using std::chrono::milliseconds;

// How long a submitter has for its hello and its request: the acceptor
// waits for one connection at a time.
constexpr milliseconds kRequestTimeout{5000};

void refuse(int fd, const std::string& why) {
  send_all(fd, encode_warm_message({WarmMessage::Kind::failed, 2, "accel-run: " + why + "\n"}));
}

void post(int eventfd) {
  const uint64_t one = 1;
  if (::write(eventfd, &one, sizeof one) < 0) {
    // Only a counter at its maximum refuses, and it is read long before.
  }
}

}  // namespace

ServedRun::~ServedRun() {
  for (int fd : {client, out, err}) {
    if (fd >= 0) ::close(fd);
  }
}

void ServedRun::finish(int exit_code) {
  send_all(client, encode_warm_message({WarmMessage::Kind::ok, exit_code, ""}));
}

bool ServedRun::gone() const {
  pollfd fd{client, POLLIN, 0};
  if (::poll(&fd, 1, 0) <= 0) return false;
  char byte;
  return ::recv(client, &byte, 1, MSG_PEEK | MSG_DONTWAIT) <= 0;
}

ServeSession::ServeSession(std::string socket_path, std::string secret)
    : socket_path_(std::move(socket_path)), secret_(std::move(secret)) {
  listen_fd_ = listen_owner_only(socket_path_);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC);
  queued_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_ < 0 || queued_fd_ < 0) throw_errno("cannot create an eventfd for the serve");
  acceptor_ = std::thread([this] { accept_loop(); });
}

ServeSession::~ServeSession() {
  post(wake_fd_);
  acceptor_.join();
  ::close(listen_fd_);
  ::unlink(socket_path_.c_str());
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::unique_ptr<ServedRun>& run : queue_) {
    write_all(run->err, "accel-run: the serve stopped before running " + run->request.recipe + "\n");
    run->finish(1);
  }
  if (current_) {
    write_all(current_->err, "accel-run: the serve stopped during the run\n");
    current_->finish(1);
  }
  ::close(wake_fd_);
  ::close(queued_fd_);
}

std::unique_ptr<WarmController> ServeSession::start(std::vector<int> sockets, int out_fd, const LiveChannel* live) {
  return std::make_unique<ServeController>(*this, std::move(sockets), out_fd, live);
}

void ServeSession::accept_loop() {
  while (readable(listen_fd_, wake_fd_, -1)) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    take(fd);
  }
}

// One submitter: its hello, then its request with its two streams.
void ServeSession::take(int fd) {
  if (!peer_is_owner(fd) || !accept_hello(fd, wake_fd_, secret_, kRequestTimeout)) {
    ::close(fd);
    return;
  }
  auto run = std::make_unique<ServedRun>();
  run->client = fd;
  std::vector<int> fds;
  WarmFrameReader reader;
  std::optional<WarmCommand> command;
  const auto deadline = std::chrono::steady_clock::now() + kRequestTimeout;
  try {
    while (!(command = reader.next_command())) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
      char buffer[4096];
      ssize_t n = -1;
      if (left.count() > 0 && readable(fd, wake_fd_, static_cast<int>(left.count()))) {
        n = receive_with_fds(fd, buffer, sizeof buffer, fds);
      }
      if (n <= 0) {
        for (int stream : fds) ::close(stream);
        return;  // run's destructor closes the connection
      }
      reader.feed(buffer, static_cast<size_t>(n));
    }
    if (command->word != "submit") {
      throw std::runtime_error("this is an accel-run serve: it takes recipes from accel-run submit, not " +
                               command->word + " commands (accel-run ctl steers a run)");
    }
    if (fds.size() != 2) throw std::runtime_error("a submitted run must come with its stdout and stderr");
    run->request = decode_run_request(command->text);
  } catch (const std::exception& error) {
    for (int stream : fds) ::close(stream);
    refuse(fd, error.what());
    return;
  }
  run->out = fds[0];
  run->err = fds[1];
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t ahead = queue_.size() + (current_ ? 1 : 0);
  if (ahead > 0) {
    write_all(run->err, "accel-run: queued behind " + std::to_string(ahead) + " run(s)\n");
  }
  queue_.push_back(std::move(run));
  post(queued_fd_);
}

ServedRun* ServeSession::begin_next() {
  uint64_t count;
  if (::read(queued_fd_, &count, sizeof count) < 0) {
    // Nothing posted since the last read: the queue says what waits.
  }
  std::lock_guard<std::mutex> lock(mutex_);
  while (!queue_.empty()) {
    std::unique_ptr<ServedRun> run = std::move(queue_.front());
    queue_.pop_front();
    if (run->gone()) continue;  // its submitter left while it waited
    current_ = std::move(run);
    if (!queue_.empty()) post(queued_fd_);
    return current_.get();
  }
  return nullptr;
}

void ServeSession::end_current(int exit_code) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!current_) return;
  current_->finish(exit_code);
  current_.reset();
}

void ServeSession::workers_ended(int exit_code, const std::string& report) {
  std::unique_ptr<ServedRun> run;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    run = std::move(current_);
  }
  if (!run) return;
  write_all(run->err, report);
  run->finish(exit_code != 0 ? exit_code : 1);
}

}  // namespace accel
