// What the sockets beside a live run (live_control_server.h) and a serve
// (serve_session.h) share: owner-only listening, the peer's user checked,
// the run's secret required on the first line within a timeout.
#pragma once
#include <chrono>
#include <string>

namespace accel {

// Listens on `path` (replacing a socket left there) with mode 0600 from the
// start. Throws std::system_error naming the path.
int listen_owner_only(const std::string& path);

// Waits for `fd` or `wake_fd`; false when woken (or after `timeout_ms`, -1: none).
bool readable(int fd, int wake_fd, int timeout_ms);

// Whether the peer of `fd` is this user (SO_PEERCRED); else tells it so.
bool peer_is_owner(int fd);

// Reads "hello <secret>\n" from `fd` within `timeout`, answering "ok\n" or
// the refusal; true when accepted. Reads nothing past the line's end.
bool accept_hello(int fd, int wake_fd, const std::string& secret, std::chrono::milliseconds timeout);

// Sends all of `text`, dropping it when the peer has gone.
void send_all(int fd, const std::string& text);

}  // namespace accel
