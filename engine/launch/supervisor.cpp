#include "engine/launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>
#include <utility>

#include "engine/launch/errno_error.h"
#include "engine/launch/oom_kills.h"
#include "engine/launch/output_relay.h"
#include "engine/launch/run_directory.h"
#include "engine/launch/signal_pipe.h"
#include "engine/launch/worker_exec.h"
#include "engine/protocol/accel_variables.h"
#include "engine/protocol/error_file.h"
#include "engine/protocol/process_stat.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

using SteadyClock = std::chrono::steady_clock;

// How long a worker may survive SIGKILL (stuck in the kernel, say on a dead
// network file system) before the launcher stops waiting for it.
constexpr std::chrono::seconds kKillTimeout{10};

int64_t realtime_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

// ---- one run ---------------------------------------------------------------

// Whether the process is stopped (state T or t in /proc/PID/stat); false
// when that cannot be read.
bool process_stopped(pid_t pid) {
  const std::string stat = process_stat(pid);
  // "PID (COMMAND) STATE ...": the command may hold spaces and parentheses.
  const size_t close = stat.rfind(')');
  return close != std::string::npos && close + 2 < stat.size() && stat[close + 1] == ' ' &&
         (stat[close + 2] == 'T' || stat[close + 2] == 't');
}

struct Worker {
  pid_t pid = -1;
  bool running = false;
  std::string error_file;
  int log_fd = -1;  // its log file, when there is a log directory
  int status_fd = -1;  // read end of the exec-status pipe, until read
  RankExit exit;
};

class Run {
 public:
  explicit Run(const SupervisorOptions& options) : options_(options) {
    null_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd_ < 0) throw_errno("cannot open /dev/null");
    if (!options_.log_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(options_.log_dir, error);
      if (error) {
        ::close(null_fd_);
        throw std::system_error(error, "cannot create the log directory " + options_.log_dir);
      }
    }
  }

  // Workers still running here mean an exception cut the run short: they
  // are killed and reaped, as far as the kill timeout allows.
  ~Run() {
    for (Worker& worker : workers_) {
      if (worker.running) signal_worker(worker.pid, SIGKILL);
    }
    auto deadline = SteadyClock::now() + kKillTimeout;
    for (Worker& worker : workers_) {
      while (worker.running && SteadyClock::now() < deadline) {
        pid_t done = ::waitpid(worker.pid, nullptr, WNOHANG);
        worker.running = done == 0 || (done < 0 && errno == EINTR);
        if (worker.running) ::usleep(10000);
      }
      if (worker.status_fd >= 0) ::close(worker.status_fd);
      if (worker.log_fd >= 0) ::close(worker.log_fd);
    }
    for (size_t i = control_fds_closed_; i < options_.control_fds.size(); ++i) ::close(options_.control_fds[i]);
    ::close(null_fd_);
  }

  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  SupervisorResult execute() {
    std::vector<std::string> argv_strings = options_.command.argv;
    std::vector<char*> argv = pointers(argv_strings);
    workers_.reserve(static_cast<size_t>(options_.nproc));
    relays_.reserve(2 * static_cast<size_t>(options_.nproc));
    oom_kills_at_start_ = oom_kill_count();
    for (int rank = 0; rank < options_.nproc; ++rank) spawn(rank, argv.data());
    collect_exec_failures();
    watch();
    finish_relays();

    SupervisorResult result;
    for (Worker& worker : workers_) result.exits.push_back(std::move(worker.exit));
    result.stop = stop_;
    result.verdict = judge(result.exits, stop_);
    result.report = failure_report(result.exits, result.verdict, stop_);
    result.exit_code = result.verdict.exit_code;
    return result;
  }

 private:
  int world_size() const { return options_.world_size > 0 ? options_.world_size : options_.nproc; }

  std::vector<std::string> environment(int local_rank, const std::string& error_file) const {
    const std::pair<std::string, std::string> launch[] = {
        {"RANK", std::to_string(options_.rank_offset + local_rank)},
        {"LOCAL_RANK", std::to_string(local_rank)},
        {"WORLD_SIZE", std::to_string(world_size())},
        {"LOCAL_WORLD_SIZE", std::to_string(options_.nproc)},
        {"MASTER_ADDR", options_.master_addr},
        {"MASTER_PORT", std::to_string(options_.master_port)},
        {variables::kRole, "worker"},
        {variables::kThreads, std::to_string(options_.threads)},
        {variables::kErrorFile, error_file},
    };
    auto is_rank_variable = [](std::string_view name) {
      return name == "RANK" || name == "LOCAL_RANK" || name == "WORLD_SIZE" ||
             name == "LOCAL_WORLD_SIZE";
    };
    std::vector<std::string> env;
    for (const std::string& entry : options_.command.env) {
      std::string_view name = std::string_view(entry).substr(0, entry.find('='));
      bool overridden = std::any_of(std::begin(launch), std::end(launch),
                                    [&](const auto& var) { return var.first == name; });
      if (!overridden) env.push_back(entry);
    }
    for (const auto& [name, value] : launch) {
      if (options_.rank_variables || !is_rank_variable(name)) env.push_back(name + "=" + value);
    }
    return env;
  }

  void spawn(int local_rank, char* const* argv) {
    const int rank = options_.rank_offset + local_rank;
    Worker worker;
    worker.exit.rank = rank;
    worker.error_file = run_dir_.path() + "/rank-" + std::to_string(rank) + ".error";
    if (!options_.log_dir.empty()) {
      std::string log = options_.log_dir + "/rank-" + std::to_string(rank) + ".log";
      worker.log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (worker.log_fd < 0) throw_errno("cannot open the log file " + log);
    }
    std::vector<std::string> env = environment(local_rank, worker.error_file);
    std::vector<char*> envp = pointers(env);

    // Rank 0 owns the launcher's streams unless its output is also logged;
    // the others are relayed with a prefix. Only the first rank of a machine
    // reads the launcher's stdin (several readers would split it at random).
    const bool relayed = rank > 0 || worker.log_fd >= 0;
    std::optional<Pipe> out, err;
    if (relayed) out.emplace(), err.emplace();
    Pipe status;
    ChildPlan plan{options_.command.program.c_str(),
                   argv,
                   envp.data(),
                   local_rank == 0 && options_.stdin_to_first_rank ? STDIN_FILENO : null_fd_,
                   out ? out->write : options_.stdout_fd,
                   err ? err->write : options_.stderr_fd,
                   status.write,
                   options_.control_fds.empty() ? -1 : options_.control_fds[local_rank],
                   ::getpid(),
                   &signals_,
                   nullptr};

    // Block signals across fork so none runs the launcher's handler in the
    // child before the child sets a worker's dispositions.
    sigset_t all, previous;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &previous);
    plan.mask = &previous;
    pid_t pid = ::fork();
    if (pid == 0) exec_worker(plan);
    int fork_error = errno;
    ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0) {
      if (worker.log_fd >= 0) ::close(worker.log_fd);
      errno = fork_error;
      throw_errno("cannot start rank " + std::to_string(rank));
    }

    if (!options_.control_fds.empty()) ::close(options_.control_fds[local_rank]);
    control_fds_closed_ = local_rank + 1;
    if (options_.guardian) options_.guardian->watch(pid);
    worker.pid = pid;
    worker.exit.pid = pid;
    worker.running = true;
    worker.status_fd = status.release_read();
    const int log_fd = worker.log_fd;
    workers_.push_back(std::move(worker));
    if (relayed) {
      std::string prefix = rank > 0 ? "[rank " + std::to_string(rank) + "] " : "";
      relays_.emplace_back(out->release_read(), options_.stdout_fd, prefix, log_fd);
      relays_.emplace_back(err->release_read(), options_.stderr_fd, prefix, log_fd);
    }
  }

  // A child that could not exec wrote its errno before exiting 127; the
  // reason goes to its error file, so it is reported like a worker's own error.
  void collect_exec_failures() {
    for (Worker& worker : workers_) {
      int error = 0;
      ssize_t n;
      do {
        n = ::read(worker.status_fd, &error, sizeof(error));
      } while (n < 0 && errno == EINTR);
      ::close(std::exchange(worker.status_fd, -1));
      if (n == sizeof(error)) {
        std::string text =
            "cannot execute " + options_.command.program + ": " + std::strerror(error);
        append_error_record(worker.error_file.c_str(), kFatalRecord, text);
      }
    }
  }

  // The workers are gone: their last output is relayed, with a second in
  // all for streams nobody reads; what they drop is said.
  void finish_relays() {
    const auto deadline = SteadyClock::now() + std::chrono::seconds(1);
    size_t dropped = 0;
    for (OutputRelay& relay : relays_) dropped += relay.finish(deadline);
    if (dropped > 0) {
      write_all(options_.stderr_fd, "accel-run: " + std::to_string(dropped) +
                                        " bytes of the workers' output were dropped: nothing read the "
                                        "launcher's output\n");
    }
  }

  void watch() {
    std::vector<pollfd> fds;
    std::vector<OutputRelay*> polled;
    auto any_running = [this] {
      return std::any_of(workers_.begin(), workers_.end(), [](const Worker& w) { return w.running; });
    };
    while (any_running()) {
      fds.assign(1, pollfd{signals_.fd(), POLLIN, 0});
      polled.clear();
      // Each relay's pipe, and its stream while output waits for room there.
      for (OutputRelay& relay : relays_) {
        if (relay.fd() < 0 && relay.out_fd() < 0) continue;
        fds.push_back(pollfd{relay.fd(), POLLIN, 0});
        fds.push_back(pollfd{relay.out_fd(), POLLOUT, 0});
        polled.push_back(&relay);
      }
      if (::poll(fds.data(), fds.size(), timeout_ms()) < 0 && errno != EINTR) {
        throw_errno("poll() in the launcher");
      }
      for (int signal : signals_.drain()) {
        if (signal != SIGCHLD) on_stop_signal(signal);
      }
      for (size_t i = 0; i < polled.size(); ++i) {
        if (fds[2 * i + 1].revents != 0) {
          polled[i]->pump();
        } else if (fds[2 * i + 2].revents != 0) {
          polled[i]->send();
        }
      }
      reap();
      tick();
      enforce_deadlines();
    }
  }

  int timeout_ms() const {
    std::optional<SteadyClock::time_point> deadline;
    if (stop_) deadline = killed_ ? give_up_at_ : kill_at_;
    if (options_.on_tick && (!deadline || next_tick_ < *deadline)) deadline = next_tick_;
    if (!deadline) return -1;  // nothing to time: workers run as long as they need
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*deadline - SteadyClock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 0));
  }

  void tick() {
    if (!options_.on_tick || SteadyClock::now() < next_tick_) return;
    next_tick_ = SteadyClock::now() + options_.tick_interval;
    SupervisorTick state;
    state.stopping = stop_.has_value();
    for (const Worker& worker : workers_) {
      if (worker.running && process_stopped(worker.pid)) state.stopped_ranks.push_back(worker.exit.rank);
      if (!worker.running && worker.exit.failed() &&
          (!state.failed_rank || worker.exit.failure_ns() < first_failure_ns_)) {
        state.failed_rank = worker.exit.rank;
        first_failure_ns_ = worker.exit.failure_ns();
      }
    }
    std::optional<std::string> reason = options_.on_tick(state);
    if (reason && !stop_) {
      begin_stop(0, SIGTERM, 0);
      stop_->reason = *reason;
    }
  }

  void on_stop_signal(int signal) {
    if (!stop_ && signal == SIGINT && options_.on_interrupt && options_.on_interrupt()) return;
    if (!stop_) {
      begin_stop(signal, signal, 0);
    } else {
      kill_at_ = SteadyClock::now();  // asked twice: no more grace
    }
  }

  // `after_ns` is the failure that caused the stop: the stop is stamped later
  // even if the clock stepped back, so that failure stays the rank's own.
  void begin_stop(int cause, int signal, int64_t after_ns) {
    stop_ = StopCause{std::max(realtime_ns(), after_ns + 1), cause, {}};
    kill_at_ = SteadyClock::now() + options_.grace_period;
    // Tick at once: workers that stop quickly could otherwise all be gone
    // before the next tick, and on_tick would never see the failed rank.
    next_tick_ = SteadyClock::now();
    signal_running(signal);
  }

  void signal_running(int signal) {
    for (Worker& worker : workers_) {
      if (worker.running) signal_worker(worker.pid, signal);
    }
  }

  void reap() {
    for (Worker& worker : workers_) {
      if (!worker.running) continue;
      int status = 0;
      pid_t done;
      do {
        done = ::waitpid(worker.pid, &status, WNOHANG);
      } while (done < 0 && errno == EINTR);
      if (done == 0) continue;
      if (done < 0) throw_errno("waitpid() for rank " + std::to_string(worker.exit.rank));
      worker.running = false;
      RankExit& exit = worker.exit;
      exit.reaped_ns = realtime_ns();
      if (WIFSIGNALED(status)) {
        exit.signal = WTERMSIG(status);
        exit.core_dumped = WCOREDUMP(status);
        if (exit.signal == SIGKILL && !killed_) {
          std::optional<long> kills = oom_kill_count();
          if (kills && oom_kills_at_start_) exit.oom_killed = *kills > *oom_kills_at_start_;
        }
      } else {
        exit.exit_code = WEXITSTATUS(status);
      }
      if (exit.failed()) {
        std::vector<ErrorRecord> records = read_error_records(worker.error_file);
        exit.fatal = last_record(records, kFatalRecord);
        exit.lost_peer = last_record(records, kPeerLostRecord).has_value();
        if (exit.fatal && worker.log_fd >= 0) {
          // The error went to the error file, not the output: the log keeps it too.
          std::string text = "accel-run: the error that ended rank " + std::to_string(exit.rank) +
                             ":\n" + exit.fatal->text + "\n";
          [[maybe_unused]] ssize_t written = ::write(worker.log_fd, text.data(), text.size());
        }
        if (!stop_) begin_stop(0, SIGTERM, exit.failure_ns());
      }
      // What a worker started and left behind (a shell's background job,
      // which also ignores SIGINT) must not outlive it, whether it failed,
      // was stopped or finished.
      end_process_group(worker.pid);
      if (options_.guardian) options_.guardian->forget(worker.pid);
    }
  }

  void enforce_deadlines() {
    if (!stop_) return;
    auto now = SteadyClock::now();
    if (!killed_ && now >= kill_at_) {
      signal_running(SIGKILL);
      killed_ = true;
      give_up_at_ = now + kKillTimeout;
    } else if (killed_ && now >= give_up_at_) {
      for (Worker& worker : workers_) {
        if (!worker.running) continue;
        worker.running = false;
        worker.exit.reaped = false;
      }
    }
  }

  const SupervisorOptions& options_;
  SignalPipe signals_;
  RunDirectory run_dir_;
  int null_fd_ = -1;
  std::vector<Worker> workers_;
  std::vector<OutputRelay> relays_;
  std::optional<StopCause> stop_;
  SteadyClock::time_point kill_at_{};
  SteadyClock::time_point give_up_at_{};
  SteadyClock::time_point next_tick_ = SteadyClock::now();
  int64_t first_failure_ns_ = 0;
  bool killed_ = false;
  std::optional<long> oom_kills_at_start_;
  size_t control_fds_closed_ = 0;  // options_.control_fds before this are closed
};

}  // namespace

SupervisorResult supervise(const SupervisorOptions& options) {
  if (options.nproc < 1) {
    throw std::invalid_argument("supervise(): nproc is " + std::to_string(options.nproc) +
                                ", must be at least 1");
  }
  if (!options.control_fds.empty() && options.control_fds.size() != static_cast<size_t>(options.nproc)) {
    throw std::invalid_argument("supervise(): " + std::to_string(options.control_fds.size()) +
                                " control descriptors for " + std::to_string(options.nproc) + " workers");
  }
  return Run(options).execute();
}

}  // namespace accel
