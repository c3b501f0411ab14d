#include "engine/formats/atomic_folder.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/formats/format_error.h"

namespace accel::formats {
namespace {

namespace fs = std::filesystem;

// "a/b/" names the folder b, like "a/b".
fs::path without_trailing_slash(const std::string& folder) {
  fs::path p = fs::path(folder).lexically_normal();
  return p.has_filename() ? p : p.parent_path();
}

std::string parent_of(const std::string& folder) {
  fs::path parent = without_trailing_slash(folder).parent_path();
  return parent.empty() ? "." : parent.string();
}

std::string name_of(const std::string& folder) { return without_trailing_slash(folder).filename().string(); }

}  // namespace

std::string temporary_folder_for(const std::string& folder) {
  return parent_of(folder) + "/." + name_of(folder) + ".tmp";
}

void make_empty_folder(const std::string& folder) {
  std::error_code ec;
  fs::remove_all(folder, ec);
  if (ec) throw FormatError("cannot remove '" + folder + "': " + ec.message());
  fs::create_directories(folder, ec);
  if (ec) throw FormatError("cannot create the folder '" + folder + "': " + ec.message());
}

void fsync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw FormatError("cannot open '" + path + "' to fsync it: " + std::strerror(errno));
  int rc = ::fsync(fd);
  int saved = errno;
  ::close(fd);
  if (rc != 0) throw FormatError("cannot fsync '" + path + "': " + std::strerror(saved));
}

void commit_folder(const std::string& temporary, const std::string& folder) {
  fsync_path(temporary);
  std::string parent = parent_of(folder);
  if (::rename(temporary.c_str(), folder.c_str()) == 0) {
    fsync_path(parent);
    return;
  }
  if (errno != EEXIST && errno != ENOTEMPTY) {
    throw FormatError("cannot rename '" + temporary + "' to '" + folder + "': " + std::strerror(errno));
  }
  if (::renameat2(AT_FDCWD, temporary.c_str(), AT_FDCWD, folder.c_str(), RENAME_EXCHANGE) == 0) {
    fsync_path(parent);
    remove_folder(temporary);  // now holds the replaced checkpoint
    return;
  }
  if (errno != EINVAL && errno != ENOSYS) {
    throw FormatError("cannot swap '" + temporary + "' into '" + folder + "': " + std::strerror(errno));
  }
  std::string old = folder + ".old";
  remove_folder(old);
  if (::rename(folder.c_str(), old.c_str()) != 0 || ::rename(temporary.c_str(), folder.c_str()) != 0) {
    throw FormatError("cannot replace '" + folder + "' with '" + temporary + "': " + std::strerror(errno));
  }
  fsync_path(parent);
  remove_folder(old);
}

void remove_folder(const std::string& folder) {
  const std::string doomed = parent_of(folder) + "/." + name_of(folder) + ".removing";
  std::error_code ec;
  fs::remove_all(doomed, ec);  // left by a removal cut short
  if (ec) throw FormatError("cannot remove '" + doomed + "': " + ec.message());
  if (::rename(folder.c_str(), doomed.c_str()) != 0) {
    if (errno == ENOENT) return;
    throw FormatError("cannot remove '" + folder + "': " + std::strerror(errno));
  }
  fs::remove_all(doomed, ec);
  if (ec) throw FormatError("cannot remove '" + folder + "' (renamed '" + doomed + "'): " + ec.message());
}

}  // namespace accel::formats
