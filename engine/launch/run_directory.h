// The run directory, home of the workers' error files: a fresh folder under
// $TMPDIR (mkdtemp, mode 0700), removed with what it holds when the run ends.
#pragma once
#include <string>

namespace accel {

class RunDirectory {
 public:
  RunDirectory();
  ~RunDirectory();
  RunDirectory(const RunDirectory&) = delete;
  RunDirectory& operator=(const RunDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace accel
