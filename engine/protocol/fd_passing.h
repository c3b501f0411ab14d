// File descriptors sent over a Unix socket with the bytes of a frame
// (SCM_RIGHTS): `accel-run submit` hands the serve its stdout and stderr,
// and the serve hands each warm worker the streams of one run, so a run's
// output goes where a cold run's would, with no copy through the serve.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace accel {

// Sends all of `text`, with `fds` attached to its first byte. False when
// the peer has gone (or the socket fails).
bool send_with_fds(int socket, const std::string& text, const std::vector<int>& fds);

// recv() of at most `size` bytes that also takes the descriptors attached
// to them, appending them to `fds` (close-on-exec). Returns what recv does.
ssize_t receive_with_fds(int socket, char* buffer, size_t size, std::vector<int>& fds);

}  // namespace accel
