// The control socket of a live run (docs/live-runs.md): `accel-run attach`
// and `accel-run ctl` connect to it, present the run's secret, and send Lua
// chunks, which the server posts to the run's store for the ranks to run at
// their next step boundary (engine/protocol/live_control_keys.h); it
// answers with each rank's outcome once every rank has given one.
// `status` is answered from what the ranks publish, without disturbing them.
//
// Who may connect: the socket (mode 0600) lies in the run's folder (mode
// 0700, live_run_folder.h), the peer's user must be the launcher's
// (SO_PEERCRED), and its first line must be "hello <secret>". Each
// connection then sends commands framed as the warm workers' are
// (warm_protocol.h: "chunk <bytes>\n<text>") and gets one message per
// command: "ok <step> <bytes>\n<text>" when applied (or for status),
// "failed <step> <bytes>\n<text>" when not.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/protocol/live_control_keys.h"
#include "engine/protocol/store_connection.h"

namespace accel {

class LiveControlServer {
 public:
  // Listens on `socket_path` (replacing a socket left there) for run
  // number `run` of the store `store`, with `world_size` ranks (Note [one
  // store, many runs] in live_control_keys.h); marks the store as taking
  // this run's chunks and names the files applied changes go to.
  LiveControlServer(std::string socket_path, StoreAddress store, int world_size, std::vector<std::string> logs,
                    int run);
  // Stops listening, ends every connection (a chunk not yet taken is
  // answered that the run ended), and marks the store as taking none.
  ~LiveControlServer();
  LiveControlServer(const LiveControlServer&) = delete;
  LiveControlServer& operator=(const LiveControlServer&) = delete;

 private:
  void accept_loop();
  void serve(int fd);
  // The reply to one command: whether it was applied (status: true), the
  // step, the text.
  struct Reply {
    bool applied = false;
    int64_t step = -1;
    std::string text;
  };
  Reply handle(StoreConnection& store, const std::string& text);
  Reply status(StoreConnection& store);

  std::string socket_path_;
  StoreAddress store_;
  int world_size_;
  int run_;
  live_keys::RunKeys keys_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // an eventfd: written once to stop every thread
  std::atomic<bool> stopping_{false};
  std::mutex post_mutex_;  // chunks are numbered and posted one at a time
  int64_t posted_ = 0;
  std::mutex threads_mutex_;
  struct Connection {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Connection> threads_;
  std::thread acceptor_;
};

}  // namespace accel
