#include "engine/launch/failure_report.h"

#include <csignal>
#include <sstream>
#include <tuple>

namespace accel {
namespace {

bool failed_on_its_own(const RankExit& exit, const std::optional<StopCause>& stop) {
  if (!exit.reaped) return false;  // only a rank being stopped is left unreaped
  return exit.failed() && (!stop || exit.failure_ns() < stop->time_ns);
}

// Whether `a` is more to blame than `b`, both having failed on their own.
bool blamed_before(const RankExit& a, const RankExit& b) {
  return std::make_tuple(a.lost_peer, a.failure_ns(), a.rank) <
         std::make_tuple(b.lost_peer, b.failure_ns(), b.rank);
}

std::string how_it_ended(const RankExit& exit) {
  if (exit.signal == 0) return "failed with exit code " + std::to_string(exit.exit_code);
  if (exit.signal == SIGKILL && exit.oom_killed.value_or(false)) {
    return "was killed by the out-of-memory killer (signal 9, SIGKILL)";
  }
  std::string text = "was killed by signal " + std::to_string(exit.signal) + " (" +
                     signal_name(exit.signal);
  if (exit.signal == SIGKILL && !exit.oom_killed) {
    // The kernel's out-of-memory killer sends SIGKILL, and this system keeps
    // no count that would tell.
    text += ", out of memory?";
  } else if (exit.signal == SIGKILL) {
    text += ", not from the out-of-memory killer";
  }
  if (exit.core_dumped) text += ", core dumped";
  return text + ")";
}

std::string pid_of(const RankExit& exit) {
  return exit.pid > 0 ? " (pid " + std::to_string(exit.pid) + ")" : "";
}

}  // namespace

std::string quoted_error_text(const std::string& text, const std::string& prefix) {
  constexpr size_t kMaxLineBytes = 400;
  constexpr size_t kMaxLines = 60;
  std::ostringstream out;
  std::istringstream lines(text);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    if (++count > kMaxLines) {
      size_t rest = 1;
      while (std::getline(lines, line)) ++rest;
      out << prefix << "... (" << rest << " more lines)\n";
      break;
    }
    out << prefix;
    for (size_t i = 0; i < line.size(); ++i) {
      if (i == kMaxLineBytes) {
        out << "... (" << line.size() - i << " more bytes)";
        break;
      }
      const auto c = static_cast<unsigned char>(line[i]);
      if ((c < 0x20 && c != '\t') || c == 0x7f) {
        static constexpr char kHex[] = "0123456789abcdef";
        out << "\\x" << kHex[c >> 4] << kHex[c & 15];
      } else {
        out << line[i];
      }
    }
    out << '\n';
  }
  return out.str();
}

std::string signal_name(int signal) {
  struct Name {
    int number;
    const char* name;
  };
  static constexpr Name kNames[] = {
      {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
      {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
      {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
      {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"}, {SIGXCPU, "SIGXCPU"},
      {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
  };
  for (const Name& entry : kNames) {
    if (entry.number == signal) return entry.name;
  }
  return "signal " + std::to_string(signal);
}

Verdict judge(const std::vector<RankExit>& exits, const std::optional<StopCause>& stop) {
  Verdict verdict;
  verdict.fates.resize(exits.size(), Fate::succeeded);
  for (size_t i = 0; i < exits.size(); ++i) {
    const RankExit& exit = exits[i];
    if (failed_on_its_own(exit, stop)) {
      verdict.fates[i] = Fate::failed_too;
      if (!verdict.culprit || blamed_before(exit, exits[*verdict.culprit])) verdict.culprit = i;
    } else if (stop && (exit.failed() || exit.reaped_ns >= stop->time_ns)) {
      verdict.fates[i] = Fate::stopped;
    }
  }
  if (verdict.culprit) {
    verdict.fates[*verdict.culprit] = Fate::culprit;
    const RankExit& culprit = exits[*verdict.culprit];
    verdict.exit_code = culprit.signal != 0 ? 128 + culprit.signal : culprit.exit_code;
  } else if (stop && stop->signal != 0) {
    verdict.exit_code = 128 + stop->signal;
  } else if (stop && !stop->reason.empty()) {
    verdict.exit_code = 1;
  }
  return verdict;
}

std::string failure_report(const std::vector<RankExit>& exits, const Verdict& verdict,
                           const std::optional<StopCause>& stop) {
  std::ostringstream out;
  std::string cause;
  if (verdict.culprit) {
    const RankExit& culprit = exits[*verdict.culprit];
    out << "accel-run: rank " << culprit.rank << ' ' << how_it_ended(culprit) << pid_of(culprit)
        << "\n";
    if (culprit.fatal) out << quoted_error_text(culprit.fatal->text, "  ");
    cause = "after rank " + std::to_string(culprit.rank) + " failed";
  } else if (stop && stop->signal != 0) {
    out << "accel-run: interrupted by " << signal_name(stop->signal) << '\n';
    cause = "on " + signal_name(stop->signal);
  } else if (stop && !stop->reason.empty()) {
    out << "accel-run: stopping: " << stop->reason << '\n';
    cause = "after " + stop->reason;
  }
  for (size_t i = 0; i < exits.size(); ++i) {
    const RankExit& exit = exits[i];
    std::string who = "accel-run: rank " + std::to_string(exit.rank);
    if (!exit.reaped) {
      out << who << pid_of(exit) << " did not exit after SIGKILL and was left behind\n";
    } else if (verdict.fates[i] == Fate::failed_too) {
      out << who << (exit.lost_peer ? " lost a peer and " : " also ") << how_it_ended(exit)
          << pid_of(exit) << ", " << cause << '\n';
    } else if (verdict.fates[i] == Fate::stopped) {
      out << who << " was stopped by the launcher " << cause
          << (exit.signal == SIGKILL ? " (it needed SIGKILL)" : "") << '\n';
    }
  }
  return out.str();
}

}  // namespace accel
