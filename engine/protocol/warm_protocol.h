// What a launcher under `accel-run --watch` or `accel-run repl` and its warm
// workers say to each other over a socket per worker, inherited by the
// worker as file descriptor kControlFd (ACCEL_CONTROL_FD names it; its
// presence makes the worker a warm one).
//
// The launcher sends commands, each "<word> <bytes>\n" and <bytes> of text:
//   run      run the recipe in a new Lua state: with no text, the worker's
//            own (--watch); else the RunRequest the text encodes, with the
//            run's stdout and stderr attached to the frame (fd_passing.h)
//            (accel-run serve)
//   chunk    run this Lua chunk in the session's state ("=expr": its value)
//   check    say whether this text is a whole chunk or needs more lines
// The worker answers "ready <pid> 0\n" once when it has started, then one
// message per command:
//   "ok <collectives> <bytes>\n" and <bytes> of text (a chunk's values)
//   "failed <collectives> <bytes>\n" and <bytes> of error text
//   "more 0 0\n" (check: the chunk is not complete)
// where <collectives> counts the collectives the rank's communicator has run
// so far: ranks whose commands all ended with equal counts left no
// collective half done, so their process group can serve the next one.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace accel {

constexpr int kControlFd = 3;  // its number reaches the worker in variables::kControlFd

struct WarmCommand {
  std::string word;  // run, chunk, check; submit (accel-run submit to a serve)
  std::string text;
};

// A recipe sent to `accel-run serve`: the folder it was submitted from
// (paths in it are relative to that, as a cold run's are), the recipe and
// what follows its `--`.
struct RunRequest {
  std::string cwd;
  std::string recipe;
  std::vector<std::string> args;
};

// As text: the fields separated by NUL bytes, which none of them can hold.
std::string encode_run_request(const RunRequest& request);
// Throws std::runtime_error when `text` holds no folder and recipe.
RunRequest decode_run_request(const std::string& text);

struct WarmMessage {
  enum class Kind { ready, ok, failed, more } kind = Kind::ready;
  int64_t number = 0;  // ready: the worker's pid; ok, failed: its collectives so far
  std::string text;    // ok: the values; failed: the error
};

std::string encode_warm_command(const WarmCommand& command);
std::string encode_warm_message(const WarmMessage& message);

// Collects bytes from the socket and takes whole frames off the front:
// "<word> <number>... <bytes>\n<bytes of text>".
class WarmFrameReader {
 public:
  void feed(const char* data, size_t size) { buffer_.append(data, size); }
  // The next whole command, or nothing until more bytes come. Throws
  // std::runtime_error on bytes that are none (quoting them).
  std::optional<WarmCommand> next_command();
  // The same for the worker's messages.
  std::optional<WarmMessage> next_message();

 private:
  // The header's words and the text after it, once all its bytes are here.
  std::optional<std::pair<std::string, std::string>> next_frame();
  std::string buffer_;
};

}  // namespace accel
