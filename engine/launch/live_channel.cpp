#include "engine/launch/live_channel.h"

#include <utility>

#include "engine/launch/output_relay.h"

namespace accel {

LiveRun::LiveRun(std::unique_ptr<LiveRunFolder> own_folder, const LiveRunFolder& folder, StoreAddress store,
                 int world_size, std::vector<std::string> logs, int number)
    : own_folder_(std::move(own_folder)),
      id_(folder.id()),
      server_(folder.socket_path(), std::move(store), world_size, std::move(logs), number) {}

LiveChannel::LiveChannel(StoreAddress store, int world_size, std::string log_dir, const LiveRunFolder* folder)
    : store_(std::move(store)), world_size_(world_size), log_dir_(std::move(log_dir)), folder_(folder) {}

std::unique_ptr<LiveRun> LiveChannel::open(int number, const std::string& recipe, const std::string& cwd,
                                           int warn_fd) const {
  try {
    std::unique_ptr<LiveRunFolder> own;
    if (!folder_) own = std::make_unique<LiveRunFolder>(store_.token, recipe, "run", cwd);
    const LiveRunFolder& folder = folder_ ? *folder_ : *own;
    std::vector<std::string> logs{folder.log_path()};
    if (!log_dir_.empty()) logs.push_back(log_dir_ + "/control.log");
    return std::make_unique<LiveRun>(std::move(own), folder, store_, world_size_, std::move(logs), number);
  } catch (const std::exception& error) {
    write_all(warn_fd, std::string("accel-run: warning: this run takes no control chunks: ") + error.what() + "\n");
    return nullptr;
  }
}

}  // namespace accel
