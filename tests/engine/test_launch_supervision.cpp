// What the supervisor does for multi-node runs, logs and the launcher's
// periodic work, with real worker processes (/bin/sh scripts): global ranks
// on a node that is not the first, every rank's output kept in its log file,
// ticks that stop the run for a reason the report gives, a child that starts
// the ranks itself (mpirun) kept free of rank variables; and the wording of
// the report for out-of-memory kills and stops for a reason.
#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "engine/launch/failure_report.h"
#include "engine/launch/supervisor.h"
#include "tests/engine/supervisor_scratch.h"

namespace {

using accel::Fate;
using accel::RankExit;
using accel::SupervisorOptions;
using accel::SupervisorResult;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;
using accel::testing::Scratch;
using accel::testing::shell_workers;

}  // namespace

TEST_CASE("on a later node, ranks are global and every one is prefixed", "[supervision]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2, "echo \"rank=$RANK local=$LOCAL_RANK world=$WORLD_SIZE local_world=$LOCAL_WORLD_SIZE\"");
  options.rank_offset = 2;
  options.world_size = 4;
  SupervisorResult result = accel::supervise(options);
  CHECK(result.exit_code == 0);
  REQUIRE(result.exits.size() == 2);
  CHECK(result.exits[0].rank == 2);
  CHECK(result.exits[1].rank == 3);
  std::string out = scratch.read("stdout");
  CHECK_THAT(out, Contains("[rank 2] rank=2 local=0 world=4 local_world=2\n"));
  CHECK_THAT(out, Contains("[rank 3] rank=3 local=1 world=4 local_world=2\n"));
}

TEST_CASE("with a log directory every rank's output is also in its log", "[supervision]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 2, "echo \"out of $RANK\"; echo \"err of $RANK\" >&2; printf 'no newline'");
  options.log_dir = scratch.path("logs/deeper");
  SupervisorResult result = accel::supervise(options);
  CHECK(result.exit_code == 0);
  for (int rank : {0, 1}) {
    std::string log = scratch.read("logs/deeper/rank-" + std::to_string(rank) + ".log");
    INFO(log);
    CHECK_THAT(log, Contains("out of " + std::to_string(rank) + "\n"));
    CHECK_THAT(log, Contains("err of " + std::to_string(rank) + "\n"));
    CHECK_THAT(log, Contains("no newline\n"));
    CHECK_THAT(log, !Contains("[rank"));
  }
  // The terminal still gets it all: rank 0 unprefixed, rank 1 prefixed.
  CHECK_THAT(scratch.read("stdout"), Contains("out of 0\n"));
  CHECK_THAT(scratch.read("stdout"), Contains("[rank 1] out of 1\n"));
  CHECK_THAT(scratch.read("stderr"), Contains("err of 0\n"));

  // A second run appends.
  accel::supervise(options);
  std::string log = scratch.read("logs/deeper/rank-1.log");
  CHECK(log.find("out of 1") != log.rfind("out of 1"));
}

TEST_CASE("a tick can stop the run for a reason the report gives", "[supervision]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(scratch, 2, "sleep 30");
  options.grace_period = milliseconds(2000);
  options.tick_interval = milliseconds(50);
  int ticks = 0;
  options.on_tick = [&](const accel::SupervisorTick& tick) -> std::optional<std::string> {
    ++ticks;
    if (tick.stopping) return std::nullopt;
    if (ticks == 5) return std::string("node 1 failed (rank 3 failed)");
    return std::nullopt;
  };
  auto start = std::chrono::steady_clock::now();
  SupervisorResult result = accel::supervise(options);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(ticks >= 5);
  CHECK(result.exit_code == 1);
  REQUIRE(result.stop);
  CHECK(result.stop->reason == "node 1 failed (rank 3 failed)");
  CHECK(result.verdict.fates[0] == Fate::stopped);
  CHECK_FALSE(result.verdict.culprit);
  CHECK_THAT(result.report, Contains("accel-run: stopping: node 1 failed (rank 3 failed)"));
  CHECK_THAT(result.report,
             Contains("rank 0 was stopped by the launcher after node 1 failed (rank 3 failed)"));
}

TEST_CASE("ticks see the first failing rank while the others are stopped", "[supervision]") {
  Scratch scratch;
  SupervisorOptions options =
      shell_workers(scratch, 3, "[ $LOCAL_RANK = 1 ] && exit 3; exec sleep 30");
  options.rank_offset = 3;
  options.world_size = 6;
  options.tick_interval = milliseconds(20);
  std::optional<int> seen;
  options.on_tick = [&](const accel::SupervisorTick& tick) -> std::optional<std::string> {
    if (tick.stopping && tick.failed_rank) seen = tick.failed_rank;
    return std::nullopt;
  };
  SupervisorResult result = accel::supervise(options);
  CHECK(result.exit_code == 3);
  CHECK(seen == 4);
}

TEST_CASE("a child that starts the ranks itself gets no rank variables", "[supervision]") {
  Scratch scratch;
  SupervisorOptions options = shell_workers(
      scratch, 1, "echo \"[${RANK-unset}] [${WORLD_SIZE-unset}] [$MASTER_PORT] [$ACCEL_ERROR_FILE]\"");
  options.rank_variables = false;
  options.command.env.push_back("RANK=7");  // inherited ones go too
  SupervisorResult result = accel::supervise(options);
  CHECK(result.exit_code == 0);
  std::string out = scratch.read("stdout");
  CHECK_THAT(out, Contains("[unset] [unset] [29511] ["));
  CHECK_THAT(out, !Contains("[]\n"));
}

TEST_CASE("the report tells an out-of-memory kill from another SIGKILL", "[supervision]") {
  auto report_for = [](std::optional<bool> oom) {
    RankExit exit;
    exit.rank = 1;
    exit.pid = 4242;
    exit.signal = SIGKILL;
    exit.reaped_ns = 10;
    exit.oom_killed = oom;
    std::vector<RankExit> exits = {exit};
    return accel::failure_report(exits, accel::judge(exits, std::nullopt), std::nullopt);
  };
  CHECK_THAT(report_for(true), Contains("rank 1 was killed by the out-of-memory killer (signal 9, SIGKILL) (pid 4242)"));
  CHECK_THAT(report_for(false), Contains("killed by signal 9 (SIGKILL, not from the out-of-memory killer)"));
  CHECK_THAT(report_for(std::nullopt), Contains("killed by signal 9 (SIGKILL, out of memory?)"));

  RankExit core;
  core.rank = 0;
  core.signal = SIGSEGV;
  core.core_dumped = true;
  core.reaped_ns = 5;
  std::vector<RankExit> exits = {core};
  std::string report = accel::failure_report(exits, accel::judge(exits, std::nullopt), std::nullopt);
  CHECK_THAT(report, Contains("rank 0 was killed by signal 11 (SIGSEGV, core dumped)\n"));  // no pid known
}
