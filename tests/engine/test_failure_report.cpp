// Telling the culprit of a failed run from its victims, the report the
// launcher prints, and the error file format workers write it from.
#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include "engine/protocol/error_file.h"
#include "engine/launch/failure_report.h"

namespace accel {
// Lets Catch print fates in failed comparisons.
std::ostream& operator<<(std::ostream& out, Fate fate) {
  const char* names[] = {"succeeded", "culprit", "failed_too", "stopped"};
  return out << names[static_cast<int>(fate)];
}
}  // namespace accel

namespace {

using accel::ErrorRecord;
using accel::Fate;
using accel::RankExit;
using accel::StopCause;
using Catch::Matchers::Contains;

RankExit exited(int rank, int code, int64_t reaped_ns) {
  RankExit exit;
  exit.rank = rank;
  exit.pid = 1000 + rank;
  exit.exit_code = code;
  exit.reaped_ns = reaped_ns;
  return exit;
}

RankExit killed(int rank, int signal, int64_t reaped_ns) {
  RankExit exit = exited(rank, 0, reaped_ns);
  exit.signal = signal;
  return exit;
}

RankExit with_fatal(RankExit exit, int64_t time_ns, const std::string& text) {
  exit.fatal = ErrorRecord{"fatal", time_ns, text};
  return exit;
}

// A file in a fresh temporary directory, removed with it.
struct TempFile {
  std::string dir;
  std::string path;
  TempFile() {
    const char* tmpdir = getenv("TMPDIR");
    dir = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/accel-test-XXXXXX";
    REQUIRE(mkdtemp(dir.data()) != nullptr);
    path = dir + "/rank-0.error";
  }
  ~TempFile() {
    unlink(path.c_str());
    rmdir(dir.c_str());
  }
};

int64_t now_ns() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

}  // namespace

TEST_CASE("every rank succeeding is exit code 0 and no report", "[failure_report]") {
  std::vector<RankExit> exits = {exited(0, 0, 10), exited(1, 0, 11)};
  accel::Verdict verdict = accel::judge(exits, std::nullopt);
  CHECK_FALSE(verdict.culprit);
  CHECK(verdict.exit_code == 0);
  CHECK(verdict.fates == std::vector<Fate>{Fate::succeeded, Fate::succeeded});
  CHECK(accel::failure_report(exits, verdict, std::nullopt).empty());
}

TEST_CASE("the failing rank is the culprit and the rank stopped for it a victim",
          "[failure_report]") {
  // Rank 1 fails at 100 and is reaped at 105; the launcher stops rank 0 at 106.
  StopCause stop{106, 0};
  std::vector<RankExit> exits = {killed(0, SIGTERM, 110),
                                 with_fatal(exited(1, 3, 105), 100,
                                            "recipe.lua:7: boom\nstack traceback:\n\t[C]: in ?")};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.exit_code == 3);
  CHECK(verdict.fates == std::vector<Fate>{Fate::stopped, Fate::culprit});
  CHECK(accel::failure_report(exits, verdict, stop) ==
        "accel-run: rank 1 failed with exit code 3 (pid 1001)\n"
        "  recipe.lua:7: boom\n"
        "  stack traceback:\n"
        "  \t[C]: in ?\n"
        "accel-run: rank 0 was stopped by the launcher after rank 1 failed\n");
}

TEST_CASE("a victim reaped first but failing later by its error file is not the culprit",
          "[failure_report]") {
  // Rank 1 dies at 50; rank 0 notices the dead peer and fails at 60, and the
  // launcher happens to reap rank 0 first (at 100) and stops the run at 101.
  StopCause stop{101, 0};
  std::vector<RankExit> exits = {
      with_fatal(exited(0, 1, 100), 60, "connection reset by peer"),
      with_fatal(exited(1, 2, 110), 50, "recipe.lua:3: the real error"),
      killed(2, SIGKILL, 5000)};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.exit_code == 2);
  CHECK(verdict.fates == std::vector<Fate>{Fate::failed_too, Fate::culprit, Fate::stopped});
  std::string report = accel::failure_report(exits, verdict, stop);
  CHECK(report.rfind("accel-run: rank 1 failed with exit code 2 (pid 1001)\n"
                     "  recipe.lua:3: the real error\n",
                     0) == 0);
  CHECK_THAT(report, Contains("accel-run: rank 0 also failed with exit code 1 (pid 1000), "
                              "after rank 1 failed\n"));
  CHECK_THAT(report, !Contains("connection reset"));
  CHECK_THAT(report, Contains("accel-run: rank 2 was stopped by the launcher after rank 1 "
                              "failed (it needed SIGKILL)\n"));
}

TEST_CASE("a rank that lost a peer is blamed only when every failed rank did",
          "[failure_report]") {
  // Rank 0 lost its peer and failed at 40, before rank 1's own failure at 50
  // (its error file came later than the broken connection).
  StopCause stop{101, 0};
  RankExit lost = with_fatal(exited(0, 1, 100), 40, "connection closed by peer");
  lost.lost_peer = true;
  std::vector<RankExit> exits = {lost, with_fatal(exited(1, 2, 60), 50, "the real error")};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.exit_code == 2);
  CHECK(verdict.fates[0] == Fate::failed_too);
  CHECK_THAT(accel::failure_report(exits, verdict, stop),
             Contains("accel-run: rank 0 lost a peer and failed with exit code 1 (pid 1000), "
                      "after rank 1 failed\n"));

  // With no rank to blame but itself (its peer was on another machine, say), it is the culprit.
  std::vector<RankExit> alone = {lost, exited(1, 0, 30)};
  verdict = accel::judge(alone, stop);
  REQUIRE(verdict.culprit == 0u);
  CHECK(verdict.exit_code == 1);
}

TEST_CASE("without an error file a rank's failure time is when it was reaped",
          "[failure_report]") {
  // Rank 0 was killed (no error file) and reaped at 100; rank 1's error file
  // says 120, before the stop at 130 but after rank 0's reaping.
  StopCause stop{130, 0};
  std::vector<RankExit> exits = {killed(0, SIGSEGV, 100),
                                 with_fatal(exited(1, 1, 140), 120, "peer gone")};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 0u);
  CHECK(verdict.exit_code == 128 + SIGSEGV);
  CHECK(verdict.fates[1] == Fate::failed_too);
  CHECK_THAT(accel::failure_report(exits, verdict, stop),
             Contains("accel-run: rank 0 was killed by signal 11 (SIGSEGV) (pid 1000)\n"));
}

TEST_CASE("a fatal record written after the stop signal makes a victim", "[failure_report]") {
  // Rank 0 handled the launcher's SIGTERM by raising an error: not its own failure.
  StopCause stop{100, 0};
  std::vector<RankExit> exits = {with_fatal(exited(0, 1, 120), 110, "interrupted"),
                                 exited(1, 4, 90)};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.fates[0] == Fate::stopped);
  CHECK(verdict.exit_code == 4);
}

TEST_CASE("equal failure times blame the lower rank", "[failure_report]") {
  StopCause stop{200, 0};
  std::vector<RankExit> exits = {exited(0, 0, 50), exited(1, 5, 100), exited(2, 6, 100)};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.fates[0] == Fate::succeeded);  // finished before the stop: not mentioned
  CHECK(verdict.fates[2] == Fate::failed_too);
}

TEST_CASE("SIGKILL out of the blue suggests the out-of-memory killer", "[failure_report]") {
  StopCause stop{101, 0};
  std::vector<RankExit> exits = {exited(0, 0, 150), killed(1, SIGKILL, 100)};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.exit_code == 137);
  CHECK(verdict.fates[0] == Fate::stopped);  // exited 0 on SIGTERM: still stopped by the launcher
  CHECK(accel::failure_report(exits, verdict, stop) ==
        "accel-run: rank 1 was killed by signal 9 (SIGKILL, out of memory?) (pid 1001)\n"
        "accel-run: rank 0 was stopped by the launcher after rank 1 failed\n");
}

TEST_CASE("an interrupted run exits 128 + the signal and blames no rank", "[failure_report]") {
  StopCause stop{100, SIGINT};
  std::vector<RankExit> exits = {killed(0, SIGINT, 120), exited(1, 1, 130)};
  accel::Verdict verdict = accel::judge(exits, stop);
  CHECK_FALSE(verdict.culprit);
  CHECK(verdict.exit_code == 130);
  CHECK(verdict.fates == std::vector<Fate>{Fate::stopped, Fate::stopped});
  CHECK(accel::failure_report(exits, verdict, stop) ==
        "accel-run: interrupted by SIGINT\n"
        "accel-run: rank 0 was stopped by the launcher on SIGINT\n"
        "accel-run: rank 1 was stopped by the launcher on SIGINT\n");
}

TEST_CASE("a rank that survived SIGKILL is reported left behind, never blamed",
          "[failure_report]") {
  StopCause stop{101, 0};
  RankExit stuck = exited(0, 0, 0);
  stuck.reaped = false;
  std::vector<RankExit> exits = {stuck, exited(1, 1, 100)};
  accel::Verdict verdict = accel::judge(exits, stop);
  REQUIRE(verdict.culprit == 1u);
  CHECK(verdict.fates[0] == Fate::stopped);
  CHECK_THAT(accel::failure_report(exits, verdict, stop),
             Contains("accel-run: rank 0 (pid 1000) did not exit after SIGKILL and was left "
                      "behind\n"));
}

TEST_CASE("signal names", "[failure_report]") {
  CHECK(accel::signal_name(SIGKILL) == "SIGKILL");
  CHECK(accel::signal_name(SIGSEGV) == "SIGSEGV");
  CHECK(accel::signal_name(77) == "signal 77");
}

TEST_CASE("error records round-trip through the file; the last fatal one is reported",
          "[error_file]") {
  TempFile file;
  int64_t before = now_ns();
  REQUIRE(accel::append_error_record(file.path.c_str(), "c++ backtrace", "#0 f()\n#1 g()\n"));
  REQUIRE(accel::append_error_record(file.path.c_str(), "fatal", "first"));
  REQUIRE(accel::append_error_record(file.path.c_str(), "fatal",
                                     "recipe.lua:9: bad\n\nstack traceback:\n\tmain"));
  REQUIRE(accel::append_error_record(file.path.c_str(), "c++ backtrace", ""));
  int64_t after = now_ns();

  std::ifstream in(file.path);
  std::string contents((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<ErrorRecord> records = accel::parse_error_records(contents);
  REQUIRE(records.size() == 4);
  CHECK(records[0].kind == "c++ backtrace");
  CHECK(records[0].text == "#0 f()\n#1 g()");
  CHECK(records[3].text.empty());
  CHECK(records[0].time_ns >= before);
  CHECK(records[3].time_ns <= after);
  CHECK(records[0].time_ns <= records[1].time_ns);

  CHECK(accel::read_error_records(file.path).size() == 4);
  std::optional<ErrorRecord> fatal = accel::last_record(records, accel::kFatalRecord);
  REQUIRE(fatal);
  CHECK(fatal->text == "recipe.lua:9: bad\n\nstack traceback:\n\tmain");
  CHECK(fatal->time_ns == records[2].time_ns);
}

TEST_CASE("error file parsing keeps header-like text inside records", "[error_file]") {
  std::vector<ErrorRecord> records = accel::parse_error_records(
      "stray line before any record\n"
      "=== fatal time_ns=17 ===\n"
      "=== not a header ===\n"
      "=== fatal time_ns=12x ===\n"
      "=== time_ns=5 ===\n"
      "=== c++ backtrace time_ns=18 ===\n"
      "last line without newline");
  REQUIRE(records.size() == 2);
  CHECK(records[0].kind == "fatal");
  CHECK(records[0].time_ns == 17);
  CHECK(records[0].text ==
        "=== not a header ===\n=== fatal time_ns=12x ===\n=== time_ns=5 ===");
  CHECK(records[1].kind == "c++ backtrace");
  CHECK(records[1].time_ns == 18);
  CHECK(records[1].text == "last line without newline");
}

TEST_CASE("no fatal record: missing file, or only backtraces", "[error_file]") {
  TempFile file;
  CHECK(accel::read_error_records(file.path).empty());
  REQUIRE(accel::append_error_record(file.path.c_str(), "c++ backtrace", "#0 f()"));
  std::vector<ErrorRecord> records = accel::read_error_records(file.path);
  CHECK(records.size() == 1);
  CHECK_FALSE(accel::last_record(records, accel::kFatalRecord));
  CHECK_FALSE(accel::append_error_record("/nonexistent-dir/rank-0.error", "fatal", "x"));
}

TEST_CASE("the report quotes an error's start, with control bytes escaped", "[failure_report]") {
  // A data file's huge cell and a terminal escape reached the error text.
  const std::string cell(5000, 'x');
  std::string text = "bad value '" + cell + "'\n\x1b]0;owned\x07 title\n";
  for (int i = 0; i < 100; ++i) text += "frame " + std::to_string(i) + "\n";
  std::vector<RankExit> exits = {with_fatal(exited(0, 1, 105), 100, text)};
  accel::Verdict verdict = accel::judge(exits, std::nullopt);
  const std::string report = accel::failure_report(exits, verdict, std::nullopt);
  CHECK(report.find('\x1b') == std::string::npos);
  CHECK(report.find('\x07') == std::string::npos);
  CHECK_THAT(report, Catch::Contains("  \\x1b]0;owned\\x07 title\n"));
  CHECK_THAT(report, Catch::Contains("xxx... (4612 more bytes)\n"));
  CHECK_THAT(report, Catch::Contains("  frame 57\n  ... (42 more lines)\n"));
  CHECK(report.size() < 4000);
}
