// What the supervisor tests share: a scratch directory standing in for the
// launcher's stdout and stderr, and workers that are /bin/sh scripts.
#pragma once
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>

#include "engine/launch/supervisor.h"

extern char** environ;

namespace accel::testing {

// A scratch directory for one test, with files standing in for the
// launcher's stdout and stderr.
class Scratch {
 public:
  Scratch() {
    const char* tmpdir = std::getenv("TMPDIR");
    dir_ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/accel-test-XXXXXX";
    REQUIRE(mkdtemp(dir_.data()) != nullptr);
    out_fd = open_file("stdout");
    err_fd = open_file("stderr");
  }
  ~Scratch() {
    close(out_fd);
    close(err_fd);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::string read(const std::string& name) const {
    std::ifstream in(path(name));
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string out() const { return read("stdout"); }
  std::string err() const { return read("stderr"); }

  int out_fd = -1;
  int err_fd = -1;

 private:
  int open_file(const std::string& name) {
    int fd = open(path(name).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    return fd;
  }
  std::string dir_;
};

// Workers that run `script` with /bin/sh; $DIR is the scratch directory.
inline SupervisorOptions shell_workers(const Scratch& scratch, int nproc, const std::string& script) {
  SupervisorOptions options;
  options.command.program = "/bin/sh";
  options.command.argv = {"sh", "-c", "DIR='" + scratch.path("") + "'; " + script};
  for (char** entry = environ; *entry; ++entry) options.command.env.emplace_back(*entry);
  options.nproc = nproc;
  options.master_port = 29511;
  options.stdout_fd = scratch.out_fd;
  options.stderr_fd = scratch.err_fd;
  return options;
}

}  // namespace accel::testing
