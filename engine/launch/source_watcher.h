// Tells `accel-run --watch` when the recipe's Lua files change: an inotify
// watch on the recipe's folder, reporting Lua files written and closed
// (IN_CLOSE_WRITE: an editor saving in place) or moved into the folder
// (IN_MOVED_TO: an editor writing a copy and renaming it over the file).
// The folder's own files only: a recipe's `require "helpers"` finds
// helpers.lua there. When the folder itself is deleted or moved away, the
// watcher says so (lost(), which the caller asks twice a second) and
// watches the path again once a folder is there (rewatch(), repeated while
// lost).
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace accel {

class SourceWatcher {
 public:
  // `recipe` as given to the launcher, whose working directory (a full
  // path) names a relative one. Throws std::runtime_error naming the folder
  // when it cannot be watched.
  SourceWatcher(const std::string& recipe, const std::string& working_directory);
  ~SourceWatcher();
  SourceWatcher(const SourceWatcher&) = delete;
  SourceWatcher& operator=(const SourceWatcher&) = delete;

  // Readable (for poll) when changes wait to be drained.
  int fd() const { return fd_; }
  const std::string& folder() const { return folder_; }
  // The names of the Lua files changed since the last call, oldest first;
  // none when nothing changed (never blocks).
  std::vector<std::string> drain();

  // Whether the folder was deleted or moved away: nothing is watched then.
  bool lost();
  // While lost: watches the folder's path again if a folder is there now.
  // True when it does.
  bool rewatch();
  // Whether the folder watched again is another one than the one lost:
  // deleted and made again, where one moved away and back is not.
  bool recreated() const { return recreated_; }

 private:
  int fd_ = -1;
  int wd_ = -1;
  std::string folder_;
  std::string path_;
  // The folder watched (or last watched), as (device, inode).
  bool watched_ = false;
  bool recreated_ = false;
  std::pair<unsigned long, unsigned long> now_;
};

}  // namespace accel
