// The supervisor with real worker processes (/bin/sh scripts): the launch
// environment, output relaying, stopping the others when one fails, the
// grace period, forwarding of the launcher's signals, and no process left
// behind.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/launch/oom_kills.h"
#include "engine/launch/output_relay.h"
#include "engine/launch/supervisor.h"
#include "engine/protocol/process_stat.h"
#include "tests/engine/supervisor_scratch.h"

namespace accel {
// Lets Catch print fates in failed comparisons.
std::ostream& operator<<(std::ostream& out, Fate fate) {
  const char* names[] = {"succeeded", "culprit", "failed_too", "stopped"};
  return out << names[static_cast<int>(fate)];
}
}  // namespace accel

namespace {

using accel::Fate;
using accel::SupervisorOptions;
using accel::SupervisorResult;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using accel::testing::Scratch;
using accel::testing::shell_workers;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Dead, or a zombie waiting for a parent that is not this process.
bool alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t end_of_name = line.rfind(')');
  return end_of_name == std::string::npos || line.compare(end_of_name + 2, 1, "Z") != 0;
}

bool wait_until_dead(pid_t pid, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (alive(pid)) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

// Every worker was reaped: this process has no child left, living or zombie.
void require_no_children(const SupervisorResult& result) {
  for (const accel::RankExit& exit : result.exits) {
    INFO("rank " << exit.rank << " pid " << exit.pid);
    CHECK(exit.reaped);
    CHECK_FALSE(alive(exit.pid));
  }
  errno = 0;
  CHECK(waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
}

bool wait_for_file(const std::string& path, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return true;
}

pid_t read_pid(const Scratch& scratch, const std::string& name, milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    std::string text = scratch.read(name);
    if (!text.empty() && text.back() == '\n') return std::stoi(text);
    std::this_thread::sleep_for(milliseconds(10));
  }
  FAIL("no pid in " << name << " after " << timeout.count() << " ms");
  return -1;
}

// Sets a signal's disposition for the scope of a test, then restores it.
class Disposition {
 public:
  Disposition(int signal, void (*handler)(int)) : signal_(signal) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigaction(signal, &action, &saved_);
  }
  ~Disposition() { sigaction(signal_, &saved_, nullptr); }

 private:
  int signal_;
  struct sigaction saved_ {};
};

// The lines of `text` that start with `prefix`, in order.
std::string lines_of(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string kept;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix, 0) == 0) kept += line + "\n";
  }
  return kept;
}

// Waits for a file a worker creates, at most two seconds; for scripts.
const char* kWaitFor = "wait_for() { i=0; while [ ! -e \"$1\" ] && [ $i -lt 200 ]; do "
                       "sleep 0.01; i=$((i+1)); done; }; ";

}  // namespace

TEST_CASE("workers get the launch environment and all succeeding exits 0", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 3,
      "echo \"$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT "
      "$ACCEL_ROLE $ACCEL_THREADS\"; echo \"$ACCEL_ERROR_FILE\" > \"$DIR/error_file.$RANK\"; "
      "[ \"$(cut -d' ' -f6 /proc/$$/stat)\" = $$ ] && echo \"rank $RANK leads its session\"; "
      "[ $RANK = 0 ] || read -r line || echo \"rank $RANK: stdin at end\"");
  options.threads = 2;
  options.command.env.push_back("RANK=99");  // the launch variables win over inherited ones
  SupervisorResult result = accel::supervise(options);

  CHECK(result.exit_code == 0);
  CHECK(result.report.empty());
  CHECK_FALSE(result.stop);
  REQUIRE(result.exits.size() == 3);
  for (int rank = 0; rank < 3; ++rank) {
    CHECK(result.exits[rank].rank == rank);
    CHECK(result.exits[rank].exit_code == 0);
    CHECK(result.verdict.fates[rank] == Fate::succeeded);
  }
  std::string out = scratch.out();
  CHECK_THAT(out, Contains("0 0 3 3 127.0.0.1 29511 worker 2\n"));
  CHECK_THAT(out, Contains("[rank 1] 1 1 3 3 127.0.0.1 29511 worker 2\n"));
  CHECK_THAT(out, Contains("[rank 2] 2 2 3 3 127.0.0.1 29511 worker 2\n"));
  CHECK_THAT(out, Contains("rank 0 leads its session\n"));
  CHECK_THAT(out, Contains("[rank 2] rank 2 leads its session\n"));
  CHECK_THAT(out, Contains("[rank 1] rank 1: stdin at end\n"));  // /dev/null, not the launcher's

  // Each rank had its own error file in a run directory that is gone now.
  auto error_file = [&](int rank) {
    std::string line = scratch.read("error_file." + std::to_string(rank));
    return std::filesystem::path(line.substr(0, line.find('\n')));
  };
  CHECK(error_file(0).filename() == "rank-0.error");
  CHECK(error_file(2).filename() == "rank-2.error");
  CHECK(error_file(0).parent_path() == error_file(2).parent_path());
  CHECK_FALSE(error_file(0).parent_path().empty());
  CHECK_FALSE(std::filesystem::exists(error_file(0).parent_path()));
  require_no_children(result);
}

TEST_CASE("rank 0 writes as is; other ranks' lines are prefixed, a partial last line too",
          "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2,
      "if [ $RANK = 0 ]; then printf 'zero\\n'; printf 'zero err\\n' >&2; else "
      "printf 'one\\ntwo\\n'; printf 'to stderr\\n' >&2; printf 'partial'; fi");
  SupervisorResult result = accel::supervise(options);

  CHECK(result.exit_code == 0);
  std::string out = scratch.out();
  CHECK_THAT(out, Contains("zero\n"));
  CHECK_THAT(out, !Contains("[rank 0]"));
  // Rank 0's line may land anywhere between rank 1's.
  CHECK(lines_of(out, "[rank 1] ") == "[rank 1] one\n[rank 1] two\n[rank 1] partial\n");
  CHECK_THAT(out, !Contains("to stderr"));
  std::string err = scratch.err();
  CHECK_THAT(err, Contains("zero err\n"));
  CHECK_THAT(err, Contains("[rank 1] to stderr\n"));
  require_no_children(result);
}

TEST_CASE("lines of ranks writing at once never interleave", "[supervisor]") {
  Scratch scratch;
  // Three ranks write 2000 long lines each as fast as they can.
  const std::string line(300, 'x');
  SupervisorOptions options = shell_workers(
      scratch, 4,
      "[ $RANK = 0 ] && exit 0; i=0; while [ $i -lt 2000 ]; do echo \"$RANK " + line +
          "\"; i=$((i+1)); done");
  SupervisorResult result = accel::supervise(options);

  REQUIRE(result.exit_code == 0);
  std::istringstream lines(scratch.out());
  int count[4] = {0, 0, 0, 0};
  int bad = 0;
  for (std::string text; std::getline(lines, text);) {
    bool good = false;
    for (int rank = 1; rank < 4; ++rank) {
      std::string rank_text = std::to_string(rank);
      if (text == "[rank " + rank_text + "] " + rank_text + " " + line) {
        ++count[rank];
        good = true;
      }
    }
    bad += good ? 0 : 1;
  }
  CHECK(bad == 0);
  CHECK(count[1] == 2000);
  CHECK(count[2] == 2000);
  CHECK(count[3] == 2000);
}

TEST_CASE("an over-long line is relayed in pieces rather than held in memory", "[supervisor]") {
  Scratch scratch;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  accel::OutputRelay relay(fds[0], scratch.out_fd, "[rank 5] ");
  const std::string chunk(200 * 1024, 'y');  // no newline at all
  // Written from a thread: the pipe holds less than the chunk.
  std::thread writer([&] {
    size_t done = 0;
    while (done < chunk.size()) {
      ssize_t n = write(fds[1], chunk.data() + done, chunk.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    close(fds[1]);
  });
  auto deadline = Clock::now() + std::chrono::seconds(5);
  while (relay.fd() >= 0 && Clock::now() < deadline) {
    pollfd readable{relay.fd(), POLLIN, 0};
    poll(&readable, 1, 100);
    relay.pump();
  }
  writer.join();
  CHECK(relay.finish(Clock::now() + std::chrono::seconds(5)) == 0);

  std::istringstream lines(scratch.out());
  size_t pieces = 0, relayed = 0;
  for (std::string line; std::getline(lines, line); ++pieces) {
    REQUIRE(line.rfind("[rank 5] ", 0) == 0);
    CHECK(line.size() - 9 < 100 * 1024);  // cut near 64 KiB, at a read boundary
    relayed += line.size() - 9;
  }
  CHECK(pieces >= 3);
  CHECK(relayed == chunk.size());
}

TEST_CASE("a launcher stdout nobody reads does not stop the supervision", "[supervisor]") {
  // A blocking pipe, as a shell's `| reader` gives, whose reader never reads.
  Scratch scratch;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  SupervisorOptions options = shell_workers(
      scratch, 3,
      // Rank 1 writes past the pipe and the relay's buffer, then waits in its
      // write; rank 2 writes some and fails: the launcher must notice.
      "line=$(printf '%0300d' 0); "
      "if [ $RANK = 1 ]; then while :; do echo \"$line\"; done; fi; "
      "if [ $RANK = 2 ]; then i=0; while [ $i -lt 1000 ]; do echo \"$line\"; i=$((i+1)); done; sleep 0.5; exit 4; fi; "
      "exec sleep 30");
  options.stdout_fd = fds[1];
  auto start = Clock::now();
  SupervisorResult result = accel::supervise(options);
  close(fds[0]);
  close(fds[1]);

  CHECK(seconds_since(start) < 8);
  CHECK(result.exit_code == 4);
  REQUIRE(result.verdict.culprit == 2u);
  CHECK_THAT(scratch.err(), Contains("bytes of the workers' output were dropped: nothing read the launcher's output"));
  require_no_children(result);
}

TEST_CASE("a failing rank stops the others and is reported with its error", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 3,
      "if [ $RANK = 1 ]; then "
      "  printf '=== c++ backtrace time_ns=%s ===\\n#0 somewhere\\n' $(date +%s%N) >> "
      "\"$ACCEL_ERROR_FILE\"; "
      "  printf '=== fatal time_ns=%s ===\\nrecipe.lua:4: boom\\nstack traceback:\\n\\tmain "
      "chunk\\n' $(date +%s%N) >> \"$ACCEL_ERROR_FILE\"; "
      "  exit 3; "
      "fi; exec sleep 30");
  auto start = Clock::now();
  SupervisorResult result = accel::supervise(options);

  CHECK(seconds_since(start) < 4);  // sleep dies on SIGTERM: no waiting for the grace period
  CHECK(result.exit_code == 3);
  REQUIRE(result.verdict.culprit == 1u);
  CHECK(result.verdict.fates == std::vector<Fate>{Fate::stopped, Fate::culprit, Fate::stopped});
  CHECK(result.exits[0].signal == SIGTERM);
  CHECK(result.exits[2].signal == SIGTERM);
  REQUIRE(result.stop);
  CHECK(result.stop->signal == 0);
  CHECK(result.report ==
        "accel-run: rank 1 failed with exit code 3 (pid " + std::to_string(result.exits[1].pid) +
            ")\n"
            "  recipe.lua:4: boom\n"
            "  stack traceback:\n"
            "  \tmain chunk\n"
            "accel-run: rank 0 was stopped by the launcher after rank 1 failed\n"
            "accel-run: rank 2 was stopped by the launcher after rank 1 failed\n");
  require_no_children(result);
}

TEST_CASE("a rank that recorded losing a peer is not blamed for the peer's failure",
          "[supervisor]") {
  Scratch scratch;
  // Rank 0 records a lost peer and its fatal error first; rank 1 records its
  // own fatal error after that, and only then does rank 0 exit.
  const std::string record = "printf '=== %s time_ns=%s ===\\n%s\\n' ";
  SupervisorOptions options = shell_workers(
      scratch, 2,
      std::string(kWaitFor) + "if [ $RANK = 0 ]; then " + record +
          "'peer lost' $(date +%s%N) 'rank 1 is gone' >> \"$ACCEL_ERROR_FILE\"; " + record +
          "fatal $(date +%s%N) 'connection closed' >> \"$ACCEL_ERROR_FILE\"; "
          "touch \"$DIR/go\"; wait_for \"$DIR/done\"; exit 1; "
          "else wait_for \"$DIR/go\"; " + record +
          "fatal $(date +%s%N) 'the real error' >> \"$ACCEL_ERROR_FILE\"; "
          "touch \"$DIR/done\"; exec sleep 30; fi");
  SupervisorResult result = accel::supervise(options);

  REQUIRE(result.verdict.culprit == 1u);
  CHECK(result.exits[0].lost_peer);
  CHECK(result.exits[0].failure_ns() < result.exits[1].failure_ns());
  CHECK(result.exit_code == 128 + SIGTERM);  // rank 1 died of the launcher's SIGTERM
  CHECK_THAT(result.report, Contains("  the real error\n"));
  CHECK_THAT(result.report, Contains("accel-run: rank 0 lost a peer and failed with exit code 1"));
  require_no_children(result);
}

TEST_CASE("a rank killed by a signal is reported with the signal", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options =
      shell_workers(scratch, 2, "if [ $RANK = 1 ]; then kill -KILL $$; fi; exec sleep 30");
  SupervisorResult result = accel::supervise(options);

  CHECK(result.exit_code == 128 + SIGKILL);
  REQUIRE(result.verdict.culprit == 1u);
  CHECK(result.exits[1].signal == SIGKILL);
  // Where the memory cgroup counts out-of-memory kills, the launcher knows
  // this one was not; elsewhere it can only ask.
  const char* oom_note = accel::oom_kill_count() ? "not from the out-of-memory killer"
                                                 : "out of memory?";
  CHECK_FALSE(result.exits[1].oom_killed.value_or(false));
  CHECK_THAT(result.report, Contains("accel-run: rank 1 was killed by signal 9 (SIGKILL, " +
                                     std::string(oom_note) + ") (pid " +
                                     std::to_string(result.exits[1].pid) + ")\n"));
  CHECK_THAT(result.report, Contains("rank 0 was stopped by the launcher after rank 1 failed"));
  require_no_children(result);
}

TEST_CASE("a worker ignoring SIGTERM is killed after the grace period, with what it started",
          "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2,
      std::string(kWaitFor) +
          "if [ $RANK = 0 ]; then trap '' TERM; sleep 30 & echo $! > \"$DIR/grandchild\"; "
          "touch \"$DIR/ready\"; wait; else wait_for \"$DIR/ready\"; exit 1; fi");
  options.grace_period = milliseconds(500);
  auto start = Clock::now();
  SupervisorResult result = accel::supervise(options);
  double took = seconds_since(start);

  CHECK(took >= 0.5);
  CHECK(took < 4);
  CHECK(result.exit_code == 1);
  REQUIRE(result.verdict.culprit == 1u);
  CHECK(result.exits[0].signal == SIGKILL);
  CHECK(result.verdict.fates[0] == Fate::stopped);
  CHECK_THAT(result.report, Contains("rank 0 was stopped by the launcher after rank 1 failed "
                                     "(it needed SIGKILL)"));
  // The sleep rank 0 started was in its process group, so it got SIGKILL too.
  pid_t grandchild = read_pid(scratch, "grandchild", milliseconds(100));
  CHECK(wait_until_dead(grandchild, milliseconds(2000)));
  require_no_children(result);
}

TEST_CASE("SIGINT to the launcher is forwarded and the run exits 130", "[supervisor]") {
  Scratch scratch;
  // $PPID of each worker's shell is the launcher: this test process.
  SupervisorOptions options = shell_workers(
      scratch, 3, "if [ $RANK = 2 ]; then kill -INT $PPID; fi; exec sleep 30");
  options.grace_period = milliseconds(10000);
  Disposition by_default(SIGINT, SIG_DFL);  // as in a terminal, whoever started this test
  auto start = Clock::now();
  SupervisorResult result = accel::supervise(options);

  CHECK(seconds_since(start) < 4);
  CHECK(result.exit_code == 130);
  CHECK_FALSE(result.verdict.culprit);
  REQUIRE(result.stop);
  CHECK(result.stop->signal == SIGINT);
  for (const accel::RankExit& exit : result.exits) CHECK(exit.signal == SIGINT);
  CHECK(result.verdict.fates == std::vector<Fate>{Fate::stopped, Fate::stopped, Fate::stopped});
  CHECK_THAT(result.report, Contains("accel-run: interrupted by SIGINT\n"));
  CHECK_THAT(result.report, Contains("accel-run: rank 1 was stopped by the launcher on SIGINT\n"));
  require_no_children(result);
}

TEST_CASE("a second SIGTERM to the launcher skips the grace period", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2,
      std::string(kWaitFor) +
          "trap '' TERM; if [ $RANK = 0 ]; then touch \"$DIR/ready\"; else "
          "wait_for \"$DIR/ready\"; kill -TERM $PPID; sleep 0.3; kill -TERM $PPID; fi; "
          "exec sleep 30");
  options.grace_period = milliseconds(20000);
  Disposition by_default(SIGTERM, SIG_DFL);
  auto start = Clock::now();
  SupervisorResult result = accel::supervise(options);

  CHECK(seconds_since(start) < 4);
  CHECK(result.exit_code == 128 + SIGTERM);
  CHECK(result.exits[0].signal == SIGKILL);
  CHECK(result.exits[1].signal == SIGKILL);
  CHECK_THAT(result.report, Contains("accel-run: interrupted by SIGTERM\n"));
  require_no_children(result);
}

TEST_CASE("a signal the launcher was started ignoring stays ignored, by workers too",
          "[supervisor]") {
  Scratch scratch;
  // As under nohup: the hangup reaches the launcher and every worker, and the run goes on.
  SupervisorOptions options = shell_workers(
      scratch, 2, "if [ $RANK = 1 ]; then kill -HUP $PPID; fi; kill -HUP $$; sleep 0.3; "
                  "echo \"rank $RANK survived\"");
  Disposition ignored(SIGHUP, SIG_IGN);
  SupervisorResult result = accel::supervise(options);

  CHECK(result.exit_code == 0);
  CHECK_FALSE(result.stop);
  CHECK_THAT(scratch.out(), Contains("rank 0 survived\n"));
  CHECK_THAT(scratch.out(), Contains("[rank 1] rank 1 survived\n"));
  require_no_children(result);
}

TEST_CASE("a worker that cannot be executed fails the run with the reason", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(scratch, 2, "");
  options.command.program = "/nonexistent/accel-worker";
  SupervisorResult result = accel::supervise(options);

  CHECK(result.exit_code == 127);
  REQUIRE(result.verdict.culprit);
  CHECK_THAT(result.report, Contains("failed with exit code 127"));
  CHECK_THAT(result.report,
             Contains("  cannot execute /nonexistent/accel-worker: No such file or directory\n"));
  require_no_children(result);
}

TEST_CASE("workers die with a launcher that is killed", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2, "echo $$ > \"$DIR/pid.tmp.$RANK\"; mv \"$DIR/pid.tmp.$RANK\" \"$DIR/pid.$RANK\"; "
                  "exec sleep 30");
  pid_t launcher = fork();
  REQUIRE(launcher >= 0);
  if (launcher == 0) {
    // A launcher of its own, so this test can kill it; it never returns into
    // Catch. Its run directory, which it cannot remove, goes with the scratch one.
    setenv("TMPDIR", scratch.path("").c_str(), 1);
    try {
      accel::supervise(options);
    } catch (...) {
    }
    _exit(0);
  }
  pid_t rank0 = read_pid(scratch, "pid.0", milliseconds(5000));
  pid_t rank1 = read_pid(scratch, "pid.1", milliseconds(5000));
  REQUIRE(kill(launcher, SIGKILL) == 0);
  REQUIRE(waitpid(launcher, nullptr, 0) == launcher);

  CHECK(wait_until_dead(rank0, milliseconds(3000)));
  CHECK(wait_until_dead(rank1, milliseconds(3000)));
}

TEST_CASE("supervise() rejects nproc below 1", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(scratch, 0, "");
  CHECK_THROWS_WITH(accel::supervise(options), Contains("nproc is 0"));
}

TEST_CASE("only one supervise() runs at a time in a process", "[supervisor]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 1, std::string(kWaitFor) + "touch \"$DIR/started\"; wait_for \"$DIR/stop\"");
  SupervisorResult first;
  std::thread running([&] { first = accel::supervise(options); });
  CHECK(wait_for_file(scratch.path("started"), milliseconds(5000)));
  CHECK_THROWS_AS(accel::supervise(options), std::logic_error);
  std::ofstream(scratch.path("stop")).put('\n');
  running.join();
  CHECK(first.exit_code == 0);
  require_no_children(first);
}

TEST_CASE("a process's stat line reads while it runs and is empty once it is gone, never an exception",
          "[supervisor]") {
  const std::string self = accel::process_stat(::getpid());
  CHECK(self.rfind(std::to_string(::getpid()) + " (", 0) == 0);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(accel::process_stat(child).empty());  // reaped: no /proc entry (the workers' race, at its end)
}
