// What must not outlive a run, even when its launcher is killed with
// SIGKILL: the processes its workers started, and the run's shared memory
// segments.
//
// Each worker leads a process group of its own (supervisor.cpp: setsid), so
// what it starts belongs to that group unless it leaves on purpose (setsid).
// The launcher ends a worker's group as soon as the worker has exited, and
// removes the run's segments after every round. For the case where the
// launcher itself dies without running any code, it starts a guardian:
// this same executable again (ACCEL_ROLE=guardian), in a session of its own
// so that signals sent to the launcher's terminal or group miss it, which
// learns the worker groups through a pipe. When the pipe closes (the
// launcher has ended, however), the guardian kills the groups still listed
// and removes the segments, then exits.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace accel {

// The guardian's value of variables::kRole. Shared memory segments of a
// run are named "/<prefix>...": the launcher sets the prefix, one per run,
// for its workers and its guardian (variables::kShmPrefix).
inline constexpr const char* kGuardianRole = "guardian";

class RunGuardian {
 public:
  // Starts `program` as the guardian of the run whose segments start with
  // `shm_prefix`. Throws std::runtime_error when it cannot be started.
  RunGuardian(const std::string& program, const std::string& shm_prefix);
  // Closes the pipe and waits for the guardian's last sweep.
  ~RunGuardian();
  RunGuardian(const RunGuardian&) = delete;
  RunGuardian& operator=(const RunGuardian&) = delete;

  // A worker's process group to end if the launcher dies; forget() once the
  // launcher has ended it itself (so a later group reusing the number is
  // not hit).
  void watch(pid_t group);
  void forget(pid_t group);

 private:
  void send(char what, pid_t group);

  int pipe_ = -1;
  pid_t pid_ = -1;
};

// The guardian's main: reads "+PID\n" and "-PID\n" lines on stdin until it
// closes, then kills each listed group with SIGKILL and removes the
// segments named with `shm_prefix`. Returns the exit code.
int run_guardian(const std::string& shm_prefix);

// SIGKILL to every process of `group`; nothing when it is already empty.
void end_process_group(pid_t group);

// Unlinks every shared memory segment whose name starts with `prefix`.
void remove_shm_segments(const std::string& prefix);

// "accel-<launcher pid>-<8 random hex digits>-": no two runs share one.
// Named "accel-PID-PIDNS-NONCE-": the launcher's pid, the inode of the PID
// namespace that pid is in, and a random number.
std::string new_shm_prefix();

// Segments a launcher left when the whole tree, guardian included, was
// killed at once (SIGKILL, the OOM killer): every later run removes those
// of launchers that are gone. Only names of this PID namespace are looked
// at (a pid from another means nothing here); a launcher is gone when no
// process has its pid, or the one that has it started after the segment
// was made.
struct AbandonedSegments {
  int count = 0;
  uint64_t bytes = 0;
  std::vector<pid_t> launchers;
};
AbandonedSegments remove_abandoned_segments();

}  // namespace accel
