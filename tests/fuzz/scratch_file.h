// A scratch file for harnesses whose parser takes a path rather than bytes:
// one per process and name, rewritten with each input, so fuzzing several
// targets at once (or a target with -jobs) never shares one.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace accel::fuzz {

// The folder $TMPDIR/accel-fuzz-<pid>, created on first use and removed
// when the process exits normally.
inline const std::string& scratch_folder() {
  struct Folder {
    std::string path;
    Folder() {
      const auto p = std::filesystem::temp_directory_path() / ("accel-fuzz-" + std::to_string(::getpid()));
      std::filesystem::create_directories(p);
      path = p.string();
    }
    ~Folder() {
      std::error_code ignored;
      std::filesystem::remove_all(path, ignored);
    }
  };
  static const Folder folder;
  return folder.path;
}

// Writes the input to scratch_folder()/name and returns its path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_folder() + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();  // the harness cannot run, which is no finding about the parser
  }
  return path;
}

}  // namespace accel::fuzz
