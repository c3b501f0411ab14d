// Ranks as real processes for the communication tests: fork `world`
// children, run a body in each, and collect their exit codes.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <thread>
#include <vector>

// A failed check in a child process: print it and exit non-zero, which the
// parent's REQUIRE on the exit codes reports. Needs `rank` in scope.
#define CHILD_CHECK(cond)                                                                    \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "rank %d: check failed at line %d: %s\n", rank, __LINE__, #cond); \
      std::_Exit(1);                                                                         \
    }                                                                                        \
  } while (0)

namespace accel::testing {

// Runs body(rank) in `world` forked processes; a child that throws prints
// the error and exits 1. Returns the exit codes (128 + signal when killed),
// killing every child still running after 60 s.
inline std::vector<int> run_forked(int world, const std::function<void(int)>& body) {
  std::vector<pid_t> pids;
  for (int rank = 0; rank < world; ++rank) {
    pid_t pid = ::fork();
    if (pid == 0) {
      // The child must never return into Catch: it would run the other tests.
      try {
        body(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
        std::fflush(nullptr);
        std::_Exit(1);
      }
      std::fflush(nullptr);
      std::_Exit(0);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t p : pids) ::kill(p, SIGKILL);
        ::waitpid(pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

}  // namespace accel::testing
