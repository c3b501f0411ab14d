#include "engine/launch/live_run_folder.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>

#include "engine/launch/errno_error.h"
#include "engine/launch/random_hex.h"

namespace accel {
namespace {

namespace fs = std::filesystem;

// A folder only its owner, this user, may enter.
void check_private(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) throw_errno("cannot inspect " + path);
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0) {
    throw std::runtime_error(path + " must be a folder of this user's that others cannot enter (mode 0700); "
                             "it is not, so no live run is kept there");
  }
}

void make_private_folder(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) throw_errno("cannot create " + path);
  check_private(path);
}

// Writes `text` to a new file of mode `mode` (refusing one already there).
void write_new_file(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) throw_errno("cannot create " + path);
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      const int error = errno;
      ::close(fd);
      errno = error;
      throw_errno("cannot write " + path);
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

bool alive(int pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// The entry in `folder`, if its `run` file reads.
bool read_entry(const fs::path& folder, LiveRunEntry& entry) {
  std::ifstream in(folder / "run");
  std::string key, value;
  while (in >> key && std::getline(in >> std::ws, value)) {
    if (key == "pid") entry.pid = std::atoi(value.c_str());
    if (key == "cwd") entry.cwd = value;
    if (key == "recipe") entry.recipe = value;
    if (key == "kind") entry.kind = value;
  }
  entry.id = folder.filename().string();
  entry.folder = folder.string();
  return entry.pid > 0;
}

}  // namespace

std::string live_runs_directory() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const std::string path = runtime && *runtime ? std::string(runtime) + "/accel-runs"
                                               : "/tmp/accel-runs-" + std::to_string(::geteuid());
  make_private_folder(path);
  return path;
}

std::vector<LiveRunEntry> live_runs() {
  std::vector<LiveRunEntry> runs;
  std::error_code ignored;
  for (const fs::directory_entry& item : fs::directory_iterator(live_runs_directory(), ignored)) {
    LiveRunEntry entry;
    if (!item.is_directory(ignored) || !read_entry(item.path(), entry)) continue;
    if (!alive(entry.pid)) {
      fs::remove_all(item.path(), ignored);
      continue;
    }
    runs.push_back(std::move(entry));
  }
  return runs;
}

LiveRunEntry find_live_run(const std::string& id, const std::string& cwd, const std::string& kind) {
  std::vector<LiveRunEntry> found;
  for (LiveRunEntry& entry : live_runs()) {
    if (entry.kind == kind && (id.empty() ? entry.cwd == cwd : entry.id == id)) found.push_back(std::move(entry));
  }
  if (found.size() == 1) return found.front();
  const std::string what = kind == "serve" ? "accel-run serve" : "live run";
  if (found.empty()) {
    const std::string start = kind == "serve" ? "; start one with accel-run serve --nproc N" : "";
    throw std::runtime_error(id.empty() ? "no " + what + " was started from " + cwd + " (give its id; accel-run attach --list lists them" + start + ")"
                                        : "no " + what + " has the id '" + id + "' (accel-run attach --list lists them)");
  }
  std::string ids;
  for (const LiveRunEntry& entry : found) ids += " " + entry.id;
  throw std::runtime_error(std::to_string(found.size()) + " " + what + "s were started from " + cwd +
                           "; name one:" + ids);
}

LiveRunFolder::LiveRunFolder(const std::string& secret, const std::string& recipe, const std::string& kind,
                             const std::string& started_in) {
  const std::string base = live_runs_directory();
  live_runs();  // removes the folders of launchers killed outright
  for (int attempt = 0;; ++attempt) {
    id_ = random_hex(4, "a run id");
    path_ = base + "/" + id_;
    if (::mkdir(path_.c_str(), 0700) == 0) break;
    if (errno != EEXIST || attempt > 8) throw_errno("cannot create " + path_);
  }
  std::error_code ignored;
  const std::string cwd = started_in.empty() ? fs::current_path(ignored).string() : started_in;
  std::ostringstream run;
  run << "pid " << ::getpid() << "\ncwd " << cwd << "\nrecipe " << recipe << "\nkind " << kind << "\n";
  try {
    write_new_file(path_ + "/secret", secret, 0600);
    write_new_file(path_ + "/run", run.str(), 0600);
  } catch (...) {
    fs::remove_all(path_, ignored);
    throw;
  }
}

LiveRunFolder::~LiveRunFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

}  // namespace accel
