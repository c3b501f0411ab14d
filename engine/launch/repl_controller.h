// `accel-run repl`: an interactive Lua prompt whose every chunk runs on all
// ranks, in one Lua state per rank kept for the session. Lines are read with
// GNU readline (editing, the last 1000 chunks kept in a history file: see
// run_command.cpp); a line that does not end a chunk (an open `do`, a
// function half written) asks for more; `=expr` prints each rank's value.
// An error is reported per rank and the session goes on. Ctrl-C interrupts
// the chunk running (or discards the line being typed); a second Ctrl-C, or
// Ctrl-C or Ctrl-D at an empty prompt, leaves. A rank that dies is reported
// by the supervisor as usual, and new workers start with a fresh state.
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "engine/launch/warm_session.h"

namespace accel {

class ReplSession final : public WarmSession {
 public:
  // Reads the history from `history_file` (none when empty), which must be
  // a regular file; says on `report_fd` why it cannot be used otherwise.
  ReplSession(std::string history_file, int report_fd);
  ~ReplSession() override;  // writes it
  ReplSession(const ReplSession&) = delete;
  ReplSession& operator=(const ReplSession&) = delete;

  std::unique_ptr<WarmController> start(std::vector<int> sockets, int out_fd, const LiveChannel* live) override;
  bool over() const override { return over_; }
  bool stdin_to_workers() const override { return false; }

 private:
  friend class ReplController;
  std::string history_file_;
  std::atomic<bool> over_{false};
  int sets_ = 0;  // sets of workers started
};

}  // namespace accel
