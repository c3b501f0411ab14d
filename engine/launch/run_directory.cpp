#include "engine/launch/run_directory.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "engine/launch/errno_error.h"

namespace accel {

RunDirectory::RunDirectory() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = tmpdir && *tmpdir ? tmpdir : "/tmp";
  std::string path = base + "/accel-run-XXXXXX";
  if (!::mkdtemp(path.data())) throw_errno("cannot create a run directory in " + base);
  path_ = std::move(path);
}

RunDirectory::~RunDirectory() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace accel
