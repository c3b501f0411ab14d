// Tells `accel-run --watch` when the recipe's Lua files change: an inotify
// watch on the recipe's folder, reporting Lua files written and closed
// (IN_CLOSE_WRITE: an editor saving in place) or moved into the folder
// (IN_MOVED_TO: an editor writing a copy and renaming it over the file).
// The folder's own files only: a recipe's `require "helpers"` finds
// helpers.lua there.
#pragma once
#include <string>
#include <vector>

namespace accel {

class SourceWatcher {
 public:
  // Throws std::runtime_error naming the folder when it cannot be watched.
  explicit SourceWatcher(const std::string& recipe);
  ~SourceWatcher();
  SourceWatcher(const SourceWatcher&) = delete;
  SourceWatcher& operator=(const SourceWatcher&) = delete;

  // Readable (for poll) when changes wait to be drained.
  int fd() const { return fd_; }
  const std::string& folder() const { return folder_; }
  // The names of the Lua files changed since the last call, oldest first;
  // none when nothing changed (never blocks).
  std::vector<std::string> drain();

 private:
  int fd_ = -1;
  std::string folder_;
};

}  // namespace accel
