// A connection to the socket of a live run or a serve (live_run_folder.h),
// past its hello: the secret read from the run's folder, the answer "ok".
// `accel-run attach`, `ctl` and `submit` talk through it.
#pragma once
#include <string>
#include <vector>

#include "engine/launch/live_run_folder.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {

class ControlClient {
 public:
  // Throws std::runtime_error saying why it cannot connect or was refused.
  explicit ControlClient(const LiveRunEntry& run);
  ~ControlClient();
  ControlClient(const ControlClient&) = delete;
  ControlClient& operator=(const ControlClient&) = delete;

  // Sends `command` (with `fds` attached, fd_passing.h) and waits for the
  // one message that answers it.
  WarmMessage ask(const WarmCommand& command, const std::vector<int>& fds = {});

 private:
  void send(const std::string& text, const std::vector<int>& fds = {});
  int fd_ = -1;
  WarmFrameReader reader_;
};

}  // namespace accel
