// Starts the ranks of a C++ workload the way accel-run starts a recipe's:
// it hosts the rendezvous store (accel::StoreServer) and runs one process
// per rank with the torchrun environment (RANK, LOCAL_RANK, WORLD_SIZE,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), then waits for them all.
//   bench_launch --nproc N PROGRAM [ARGS...]
// Exits with the first failing rank's status (128 + signal when killed),
// after stopping the other ranks.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/launch/store_server.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 4 || std::strcmp(argv[1], "--nproc") != 0 || std::atoi(argv[2]) < 1) {
    std::fprintf(stderr, "usage: bench_launch --nproc N PROGRAM [ARGS...]\n");
    return 2;
  }
  const int nproc = std::atoi(argv[2]);
  // The bench's ranks are its own children on loopback; a fixed token does.
  const std::string token = "bench-launch";
  accel::StoreServer store("127.0.0.1", 0, token);
  const std::string port = std::to_string(store.port());

  std::vector<pid_t> children;
  for (int rank = 0; rank < nproc; ++rank) {
    // Built before fork: the store's thread may hold the allocator's lock.
    std::vector<std::string> owned;
    for (char** e = environ; *e; ++e) {
      static const char* ours[] = {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=",
                                   "MASTER_ADDR=", "MASTER_PORT=", "ACCEL_RDZV_TOKEN="};
      bool replaced = false;
      for (const char* name : ours) replaced = replaced || std::strncmp(*e, name, std::strlen(name)) == 0;
      if (!replaced) owned.emplace_back(*e);
    }
    owned.push_back("RANK=" + std::to_string(rank));
    owned.push_back("LOCAL_RANK=" + std::to_string(rank));
    owned.push_back("WORLD_SIZE=" + std::to_string(nproc));
    owned.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
    owned.push_back("MASTER_ADDR=127.0.0.1");
    owned.push_back("MASTER_PORT=" + port);
    owned.push_back("ACCEL_RDZV_TOKEN=" + token);
    std::vector<char*> env;
    for (std::string& s : owned) env.push_back(s.data());
    env.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::execve(argv[3], argv + 3, env.data());
      std::_Exit(127);
    }
    if (pid < 0) {
      std::perror("bench_launch: fork");
      return 1;
    }
    children.push_back(pid);
  }
  // A failed rank leaves its peers blocked in a collective: stop them.
  int result = 0;
  for (size_t left = children.size(); left > 0; --left) {
    int status = 0;
    pid_t pid = ::wait(&status);
    if (pid < 0) break;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      for (pid_t other : children) {
        if (other != pid) ::kill(other, SIGTERM);
      }
    }
  }
  return result;
}
