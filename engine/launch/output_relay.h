// Copies one worker output pipe to one of the launcher's streams, prefixing
// every line with the rank ("[rank 3] "), so the output of several ranks stays
// readable in one terminal or log file; and, when asked, to the rank's own
// log file as well, without the prefix.
//
// A line leaves in one write() when it is at most PIPE_BUF bytes, so relayed
// lines never interleave mid-line with each other (nor with other writers of
// a pipe the launcher writes to).
//
// The launcher never waits for its stream: a relay writes what the stream
// takes now and keeps the rest (up to kMaxUnsent bytes), written when the
// supervisor's poll says there is room. With that much kept it stops reading
// the worker's pipe, so a worker whose output nobody reads waits in its
// write as any program would, while the launcher goes on supervising.
#pragma once
#include <chrono>
#include <cstddef>
#include <string>

namespace accel {

// Writes all of `data` to `fd`, waiting for room a second at most in all;
// a stream still full then drops the rest, and a reader that has gone drops
// it at once: the launcher's output never holds up the run.
void write_all(int fd, const std::string& data);

class OutputRelay {
 public:
  // Bytes a relay keeps for a stream that takes none.
  static constexpr size_t kMaxUnsent = 1024 * 1024;

  // Takes ownership of `pipe_fd` (the read end; made non-blocking here) and
  // writes to `out_fd` and, unless it is -1, `log_fd`, neither of which it owns.
  OutputRelay(int pipe_fd, int out_fd, std::string prefix, int log_fd = -1);
  ~OutputRelay();
  OutputRelay(OutputRelay&& other) noexcept;
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  OutputRelay& operator=(OutputRelay&&) = delete;

  // The pipe to poll for input: -1 once it reached end of file, and while
  // the output kept for the stream is full.
  int fd() const { return unsent_.size() < kMaxUnsent ? pipe_fd_ : -1; }
  // The stream to poll for room: -1 when nothing waits for it.
  int out_fd() const { return unsent_.empty() ? -1 : out_fd_; }

  // Takes the complete lines available now, without blocking, and writes
  // what the stream takes; closes the pipe at end of file.
  void pump();
  // Writes what the stream takes now of the output kept for it.
  void send();

  // Relays what is left in the pipe, a partial last line included (ended with
  // a newline), and closes it; waits for the stream until `deadline` at the
  // latest. For when the worker is gone; a descendant still holding the pipe
  // open does not make this wait. Returns the bytes dropped.
  size_t finish(std::chrono::steady_clock::time_point deadline);

 private:
  void queue_line(const char* begin, const char* end);
  void close_pipe();

  int pipe_fd_;
  int out_fd_;
  int log_fd_;
  std::string prefix_;
  std::string pending_;  // the start of a line whose end has not arrived yet
  std::string unsent_;   // prefixed lines the stream has not taken yet
};

}  // namespace accel
