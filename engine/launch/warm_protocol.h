// What a launcher under `accel-run --watch` and its warm workers say to each
// other over a socket per worker, inherited by the worker as file
// descriptor kControlFd (ACCEL_CONTROL_FD names it; its presence makes the
// worker a warm one). The launcher sends "run\n"; the worker answers
// "ready\n" once when it has started, then one outcome per run:
//   "ok <collectives>\n"
//   "failed <collectives> <bytes>\n" followed by <bytes> of error text
// where <collectives> counts the collectives the rank's communicator has run
// so far: ranks whose runs all ended with equal counts left no collective
// half done, so their process group can serve the next run.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace accel {

constexpr int kControlFd = 3;
constexpr const char* kControlFdVariable = "ACCEL_CONTROL_FD";
constexpr const char* kRunCommand = "run\n";
constexpr const char* kReadyMessage = "ready\n";

struct WarmMessage {
  enum class Kind { ready, ok, failed } kind = Kind::ready;
  int64_t collectives = 0;
  std::string error;  // for failed
};

std::string encode_warm_message(const WarmMessage& message);

// Collects the bytes a worker sends and takes whole messages off the front.
class WarmMessageReader {
 public:
  void feed(const char* data, size_t size) { buffer_.append(data, size); }
  // The next whole message, or nothing until more bytes come. Throws
  // std::runtime_error on bytes that are no message (quoting them).
  std::optional<WarmMessage> next();

 private:
  std::string buffer_;
};

}  // namespace accel
