// Copies one worker output pipe to one of the launcher's streams, prefixing
// every line with the rank ("[rank 3] "), so the output of several ranks stays
// readable in one terminal or log file; and, when asked, to the rank's own
// log file as well, without the prefix.
//
// Each prefixed line leaves in a single write(), so relayed lines never
// interleave mid-line with each other (nor, up to PIPE_BUF bytes, with other
// writers of a pipe the launcher writes to).
#pragma once
#include <string>

namespace accel {

// Writes all of `data` to `fd`. A non-blocking pipe that stays full for a
// second drops the rest, and a reader that has gone drops it at once: the
// launcher's output never holds up the run.
void write_all(int fd, const std::string& data);

class OutputRelay {
 public:
  // Takes ownership of `pipe_fd` (the read end; made non-blocking here) and
  // writes to `out_fd` and, unless it is -1, `log_fd`, neither of which it owns.
  OutputRelay(int pipe_fd, int out_fd, std::string prefix, int log_fd = -1);
  ~OutputRelay();
  OutputRelay(OutputRelay&& other) noexcept;
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;
  OutputRelay& operator=(OutputRelay&&) = delete;

  // The pipe to poll for input; -1 once it reached end of file.
  int fd() const { return pipe_fd_; }

  // Relays the complete lines available now, without blocking; closes the
  // pipe at end of file.
  void pump();

  // Relays what is left in the pipe, a partial last line included (ended with
  // a newline), and closes it. For when the worker is gone; a descendant
  // still holding the pipe open does not make this wait.
  void finish();

 private:
  void write_line(const char* begin, const char* end);
  void close_pipe();

  int pipe_fd_;
  int out_fd_;
  int log_fd_;
  std::string prefix_;
  std::string pending_;  // the start of a line whose end has not arrived yet
};

}  // namespace accel
