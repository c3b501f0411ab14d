#include "engine/launch/run_command.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>

#include "engine/launch/live_channel.h"
#include "engine/launch/live_run_folder.h"
#include "engine/launch/mpi_launch.h"
#include "engine/launch/random_hex.h"
#include "engine/launch/node_rendezvous.h"
#include "engine/launch/repl_controller.h"
#include "engine/launch/run_guardian.h"
#include "engine/launch/serve_session.h"
#include "engine/launch/stall_inspector.h"
#include "engine/launch/store_server.h"
#include "engine/launch/supervisor.h"
#include "engine/launch/watch_controller.h"
#include "engine/protocol/accel_variables.h"
#include "engine/protocol/store_protocol.h"
#include "engine/protocol/collective_state.h"
#include "engine/protocol/launch_option_table.h"
#include "engine/protocol/warm_protocol.h"
#include "engine/protocol/worker_variables.h"

namespace accel {
namespace {

using std::chrono::milliseconds;

struct RoundOutcome {
  int exit_code = 0;
  // Restarting cannot help: the launcher was interrupted by a signal, the
  // nodes did not meet, or mpirun is missing.
  bool final = false;
};

// One socket pair per local rank: the launcher's ends and the workers'.
struct ControlSockets {
  std::vector<int> launcher, workers;
  explicit ControlSockets(int nproc) {
    for (int rank = 0; rank < nproc; ++rank) {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        const int error = errno;
        for (int fd : launcher) ::close(fd);
        for (int fd : workers) ::close(fd);
        throw std::runtime_error(std::string("cannot create a control socket: ") + std::strerror(error));
      }
      launcher.push_back(pair[0]);
      workers.push_back(pair[1]);
    }
  }
};

milliseconds to_ms(double seconds) { return milliseconds(std::llround(seconds * 1000)); }

void say(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// A private directory removed with everything in it when the round ends.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    const char* tmpdir = std::getenv("TMPDIR");
    path_ = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/accel-mpi-XXXXXX";
    if (!::mkdtemp(path_.data())) throw std::runtime_error("cannot create a directory in " + path_);
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Reads every rank's published collective state from the store this
// launcher hosts: prints what the stall inspector makes of it (unless stall
// reports are off), and returns why the run must stop when a rank finished
// its recipe while another waits in a collective it never entered.
class StallWatch {
 public:
  StallWatch(const StoreServer& store, int world_size, double threshold_s, int out_fd)
      : store_(store), world_size_(world_size), out_fd_(out_fd) {
    if (threshold_s > 0) inspector_.emplace(world_size, to_ms(threshold_s));
  }

  std::optional<std::string> look(const SupervisorTick& tick, const std::vector<int>& idle = {}) {
    std::vector<std::optional<CollectiveState>> states;
    for (int rank = 0; rank < world_size_; ++rank) {
      std::optional<std::string> value = store_.peek(collective_state_key(rank));
      states.push_back(value ? decode_collective_state(*value) : std::nullopt);
    }
    if (inspector_) say(out_fd_, inspector_->observe(states, StallInspector::Clock::now(), tick.stopped_ranks));
    return StallInspector::abandoned(states, idle);
  }

 private:
  const StoreServer& store_;
  std::optional<StallInspector> inspector_;
  int world_size_;
  int out_fd_;
};

// The run's store token, as its workers receive it.
std::string token_variable(const std::string& token) {
  return std::string(variables::kRdzvToken) + "=" + token;
}

// 128 random bits as hex, for a run whose nodes need not share the token.
std::string generate_token() { return random_hex(16, "a store token"); }

// What lasts the whole run, across restarts: the store's secret, the prefix
// of the run's shared memory names, and the guardian that cleans up after a
// launcher killed outright.
struct RunScope {
  std::string token;
  std::string shm_prefix;
  RunGuardian* guardian = nullptr;
  // Where `accel-run attach` finds the run (a cold run's node 0 only).
  LiveRunFolder* live = nullptr;
};

// The value of `name` in the launcher's environment, if set.
std::optional<std::string> environment_value(const RunContext& context, const std::string& name) {
  const std::string prefix = name + "=";
  for (const std::string& entry : context.env) {
    if (entry.rfind(prefix, 0) == 0) return entry.substr(prefix.size());
  }
  return std::nullopt;
}

// The launcher's environment as its workers inherit it: without the
// variables it sets for them itself, which a launcher started from a rank
// (or from a shell holding ACCEL_RDZV_TOKEN) inherited from elsewhere.
std::vector<std::string> inherited_environment(const RunContext& context) {
  std::vector<std::string> env;
  for (const std::string& entry : context.env) {
    if (!is_worker_variable(entry.substr(0, entry.find('=')))) env.push_back(entry);
  }
  return env;
}

std::vector<std::string> round_environment(const LaunchOptions& options, const RunContext& context,
                                           const RunScope& scope, int round) {
  std::vector<std::string> env = inherited_environment(context);
  env.push_back(token_variable(scope.token));
  env.push_back(std::string(variables::kShmPrefix) + "=" + scope.shm_prefix);
  for (std::string& var : worker_variables(options)) env.push_back(std::move(var));
  env.push_back(std::string(variables::kRestartCount) + "=" + std::to_string(round));
  env.push_back("GROUP_RANK=" + std::to_string(options.node_rank));
  return env;
}

// What failed on this node, in a few words for the other nodes.
std::string failure_line(std::optional<int> failed_rank) {
  return failed_rank ? "rank " + std::to_string(*failed_rank) + " failed" : "its launcher stopped";
}

RoundOutcome run_gloo_round(const LaunchOptions& options, const RunContext& context, const RunScope& scope,
                            int round, WarmSession* warm) {
  const std::string& token = scope.token;
  // Node 0's store is new for every round: no key of an earlier round survives.
  std::optional<StoreServer> store;
  if (options.node_rank == 0) {
    store.emplace(options.master_addr, static_cast<uint16_t>(options.master_port), token);
  }
  const uint16_t port = store ? store->port() : static_cast<uint16_t>(options.master_port);
  const int world_size = options.nproc * options.nnodes;

  std::optional<NodeRendezvous> nodes;
  if (options.nnodes > 1) {
    nodes.emplace(StoreAddress{options.master_addr, port, token}, round, options.node_rank,
                  options.nnodes);
    try {
      nodes->meet(options.nproc, to_ms(options.rdzv_timeout_s));
    } catch (const RendezvousError& error) {
      say(context.stderr_fd, std::string("accel-run: rendezvous failed: ") + error.what() + "\n");
      return {1, true};
    }
  }
  // Destroyed before the store: their connections wait on it. Warm workers
  // open a run's control as they start it; a cold run is run 1 of its store.
  std::optional<LiveChannel> live;
  if (store && (scope.live || warm)) {
    live.emplace(StoreAddress{options.master_addr, port, token}, world_size, options.log_dir, scope.live);
  }
  std::unique_ptr<LiveRun> control;
  if (live && !warm) control = live->open(1, options.recipe, "", context.stderr_fd);
  std::optional<StallWatch> stalls;
  if (store && world_size > 1) {
    stalls.emplace(*store, world_size, options.stall_report_s, context.stderr_fd);
  }

  SupervisorOptions supervision;
  supervision.command.program = context.worker_program;
  supervision.command.argv = {context.accel_run, options.recipe, "--"};
  supervision.command.argv.insert(supervision.command.argv.end(), options.recipe_args.begin(),
                                  options.recipe_args.end());
  // New warm workers are no restart: every run of theirs is a first start,
  // as a cold run's is.
  supervision.command.env = round_environment(options, context, scope, warm ? 0 : round);
  supervision.guardian = scope.guardian;
  supervision.nproc = options.nproc;
  supervision.rank_offset = options.node_rank * options.nproc;
  supervision.world_size = world_size;
  supervision.threads = options.threads;
  supervision.master_addr = options.master_addr;
  supervision.master_port = port;
  supervision.grace_period = to_ms(options.grace_period_s);
  supervision.stdout_fd = context.stdout_fd;
  supervision.stderr_fd = context.stderr_fd;
  supervision.log_dir = options.log_dir;
  // Under --watch and repl the workers are warm ones (warm_protocol.h),
  // driven by a controller that the ticks ask, often, whether they must be
  // stopped.
  std::unique_ptr<WarmController> controller;
  if (warm) {
    ControlSockets sockets(options.nproc);
    supervision.control_fds = sockets.workers;
    supervision.command.env.push_back(std::string(variables::kControlFd) + "=" + std::to_string(kControlFd));
    supervision.stdin_to_first_rank = warm->stdin_to_workers();
    supervision.tick_interval = milliseconds(20);
    controller = warm->start(sockets.launcher, context.stderr_fd, live ? &*live : nullptr);
    supervision.on_interrupt = [&] { return controller->interrupt(); };
  }
  bool heard = false;  // stopping because another node failed: nothing to tell them
  if (stalls || nodes || controller) {
    supervision.on_tick = [&](const SupervisorTick& tick) -> std::optional<std::string> {
      if (controller && !tick.stopping) {
        if (std::optional<WarmController::Stop> stop = controller->stop()) return stop->reason;
      }
      if (stalls && !tick.stopping) {
        const std::vector<int> idle = controller ? controller->idle_ranks() : std::vector<int>{};
        if (std::optional<std::string> abandoned = stalls->look(tick, idle)) return abandoned;
      }
      if (!nodes) return std::nullopt;
      if (tick.stopping) {
        if (!heard) nodes->publish_failure(failure_line(tick.failed_rank));
        return std::nullopt;
      }
      std::optional<std::string> news = nodes->news();
      heard = news.has_value();
      return news;
    };
  }
  const int served_before = warm ? warm->served : 0;
  SupervisorResult result = supervise(supervision);
  if (controller) {
    controller->finish();
    warm->workers_ended(result.exit_code, result.report.empty() && controller->stop()
                                              ? "accel-run: the run ended: " + controller->stop()->reason + "\n"
                                              : result.report);
    const std::optional<WarmController::Stop> stop = controller->stop();
    const bool interrupted = result.stop && result.stop->signal != 0;
    if (warm->over()) return {interrupted ? result.exit_code : 0, true};
    if (!interrupted && stop && result.stop && result.stop->reason == stop->reason && !result.verdict.culprit) {
      // The controller has reported what it saw, or the reason says it all;
      // a rank that failed before the controller's stop (a killed worker
      // whose socket closed first) is reported as in any run, below.
      say(context.stderr_fd, "accel-run: replacing the workers: " + stop->reason + "\n");
      return {0, false};
    }
    say(context.stderr_fd, result.report);
    // Workers that end before any run started cannot be kept warm: starting
    // more of them would fail the same way.
    return {result.exit_code, interrupted || warm->served == served_before};
  }
  if (nodes && result.exit_code != 0 && !heard) {
    // The workers may all have ended before a tick could tell the others.
    std::optional<int> culprit;
    if (result.verdict.culprit) culprit = result.exits[*result.verdict.culprit].rank;
    nodes->publish_failure(failure_line(culprit));
  }
  if (nodes) {
    const std::vector<int> missing = nodes->depart(result.exit_code == 0, to_ms(options.rdzv_timeout_s));
    for (int node : missing) {
      say(context.stderr_fd, "accel-run: node " + std::to_string(node) + " did not say its workers ended within " +
                                 options::number_text(options.rdzv_timeout_s) + " s (--rdzv-timeout); node 0's store closes\n");
    }
  }
  say(context.stderr_fd, result.report);
  return {result.exit_code, result.stop && result.stop->signal != 0};
}

RoundOutcome run_mpi_round(const LaunchOptions& options, const RunContext& context, const RunScope& scope,
                           int round) {
  const std::string& token = scope.token;
  const std::string mpirun = find_on_path("mpirun", environment_value(context, "PATH").value_or(""));
  if (mpirun.empty()) {
    say(context.stderr_fd,
        "accel-run: error: --backend mpi needs OpenMPI's mpirun on PATH (package openmpi-bin)\n");
    return {2, true};
  }
  // The store only carries the ranks' collective states, for stall reports
  // and timeouts that name the missing ranks; MPI itself needs no rendezvous.
  StoreServer store("127.0.0.1", 0, token);
  ScratchDirectory errors;
  std::vector<std::string> exported = worker_variables(options);
  exported.push_back(token_variable(token));
  exported.push_back(std::string(variables::kShmPrefix) + "=" + scope.shm_prefix);
  exported.push_back(std::string(variables::kRestartCount) + "=" + std::to_string(round));
  exported.push_back(std::string(variables::kErrorDir) + "=" + errors.path());
  exported.push_back(std::string(variables::kRole) + "=worker");
  exported.push_back("MASTER_ADDR=127.0.0.1");
  exported.push_back("MASTER_PORT=" + std::to_string(store.port()));
  std::optional<StallWatch> stalls;
  if (options.nproc > 1) stalls.emplace(store, options.nproc, options.stall_report_s, context.stderr_fd);

  SupervisorOptions supervision;
  supervision.command = mpirun_command(mpirun, context.accel_run, options, inherited_environment(context), exported,
                                       ::geteuid() == 0);
  supervision.nproc = 1;
  supervision.rank_variables = false;
  supervision.guardian = scope.guardian;
  supervision.threads = options.threads;
  supervision.master_port = store.port();
  supervision.grace_period = to_ms(options.grace_period_s);
  supervision.stdout_fd = context.stdout_fd;
  supervision.stderr_fd = context.stderr_fd;
  if (stalls) {
    supervision.on_tick = [&](const SupervisorTick& tick) -> std::optional<std::string> {
      if (tick.stopping) return std::nullopt;
      return stalls->look(tick);
    };
  }
  SupervisorResult result = supervise(supervision);
  const RankExit& mpirun_exit = result.exits.at(0);
  if (result.stop && result.stop->signal != 0) {
    say(context.stderr_fd, result.report);
    return {result.exit_code, true};
  }
  if (result.exit_code == 0) return {0, false};

  // mpirun stopped the other ranks after the first failure.
  std::vector<RankExit> exits = mpi_rank_exits(errors.path(), options.nproc, mpirun_exit.reaped_ns);
  StopCause stop{mpirun_exit.reaped_ns, 0, {}};
  for (const RankExit& exit : exits) {
    if (exit.fatal) stop.time_ns = std::max(stop.time_ns, exit.fatal->time_ns + 1);
  }
  Verdict verdict = judge(exits, stop);
  if (!verdict.culprit) {
    say(context.stderr_fd, "accel-run: mpirun " + std::string(mpirun_exit.signal ? "was killed" : "failed") +
                               " with exit code " + std::to_string(result.exit_code) +
                               "; no rank recorded an error (mpirun's own message is above)\n");
    return {result.exit_code, false};
  }
  say(context.stderr_fd, failure_report(exits, verdict, stop));
  return {verdict.exit_code, false};
}

// The REPL's history file: ACCEL_REPL_HISTORY, else ~/.accel_repl_history,
// else none.
std::string repl_history_file(const RunContext& context) {
  if (std::optional<std::string> file = environment_value(context, variables::kReplHistory)) return *file;
  if (std::optional<std::string> home = environment_value(context, "HOME")) return *home + "/.accel_repl_history";
  return "";
}

// The secret every connection to the store must present. The nodes of one
// run share the one the user gives; a single node's launcher makes its own,
// which only its workers learn.
std::string rdzv_token(const LaunchOptions& options, const RunContext& context) {
  if (!options.rdzv_token.empty()) return options.rdzv_token;
  const std::string token = environment_value(context, variables::kRdzvToken).value_or("");
  if (token.size() > store_protocol::kMaxTokenBytes) {
    throw std::invalid_argument(std::string(variables::kRdzvToken) + " has " + std::to_string(token.size()) +
                                " bytes; the store takes tokens of at most " +
                                std::to_string(store_protocol::kMaxTokenBytes));
  }
  if (!token.empty()) return token;
  if (options.nnodes > 1) {
    throw std::invalid_argument(
        "with --nnodes " + std::to_string(options.nnodes) + " the store on " + options.master_addr +
        ":" + std::to_string(options.master_port) +
        " takes connections from other machines, so it needs a secret: set the same " +
        variables::kRdzvToken + " (or --rdzv-token SECRET) on every node");
  }
  return generate_token();
}

}  // namespace

int run_recipe(const LaunchOptions& options, const RunContext& context) {
  for (const std::string& warning : options.warnings) say(context.stderr_fd, "accel-run: warning: " + warning + "\n");
  RunScope scope;
  try {
    scope.token = rdzv_token(options, context);
  } catch (const std::exception& error) {
    say(context.stderr_fd, std::string("accel-run: error: ") + error.what() + "\n");
    return 2;
  }
  const AbandonedSegments abandoned = remove_abandoned_segments();
  if (abandoned.count > 0) {
    std::string launchers;
    for (pid_t pid : abandoned.launchers) launchers += (launchers.empty() ? "" : ", ") + std::to_string(pid);
    char size[32];
    std::snprintf(size, sizeof size, "%.1f MiB", static_cast<double>(abandoned.bytes) / (1024.0 * 1024.0));
    say(context.stderr_fd, "accel-run: removed " + std::to_string(abandoned.count) + " shared memory segment(s), " +
                               size + ", left in /dev/shm by launcher(s) " + launchers + ", which ended\n");
  }
  scope.shm_prefix = new_shm_prefix();
  std::optional<RunGuardian> guardian;
  try {
    guardian.emplace(context.worker_program, scope.shm_prefix);
    scope.guardian = &*guardian;
  } catch (const std::exception& error) {
    say(context.stderr_fd, std::string("accel-run: error: ") + error.what() + "\n");
    return 1;
  }
  std::unique_ptr<WarmSession> warm;
  std::optional<LiveRunFolder> live;
  try {
    if (options.watch) warm = std::make_unique<WatchSession>(options.recipe);
    if (options.repl) warm = std::make_unique<ReplSession>(repl_history_file(context), context.stderr_fd);
    if (options.serve) {
      live.emplace(scope.token, "serve", "serve");
      warm = std::make_unique<ServeSession>(live->socket_path(), scope.token);
      say(context.stderr_fd, "accel-run: serving on " + std::to_string(options.nproc) + " rank(s) as " + live->id() +
                                 " (accel-run submit RECIPE.lua [-- ARGS] from this folder, or with --id " +
                                 live->id() + "; Ctrl-C stops)\n");
    }
  } catch (const std::exception& error) {
    say(context.stderr_fd, std::string("accel-run: error: ") + error.what() + "\n");
    return 1;
  }
  // A serve's runs get folders of their own (live_channel.h); every other
  // launch is one run to steer, under one id, however often its workers
  // start again.
  if (!options.serve && options.backend != "mpi" && options.node_rank == 0) {
    try {
      live.emplace(scope.token, options.recipe);
      scope.live = &*live;
      if (::isatty(context.stderr_fd)) {
        say(context.stderr_fd, "accel-run: run " + live->id() + " (steer it: accel-run attach " + live->id() + ")\n");
      }
    } catch (const std::exception& error) {
      say(context.stderr_fd, std::string("accel-run: warning: this run takes no control chunks: ") + error.what() + "\n");
    }
  }
  for (int round = 0;; ++round) {
    RoundOutcome outcome;
    try {
      outcome = options.backend == "mpi" ? run_mpi_round(options, context, scope, round)
                                         : run_gloo_round(options, context, scope, round, warm.get());
    } catch (const std::exception& error) {
      say(context.stderr_fd, std::string("accel-run: error: ") + error.what() + "\n");
      outcome = {1, true};
    }
    // A rank killed between creating a segment and every rank opening it
    // leaves the name behind.
    remove_shm_segments(scope.shm_prefix);
    if (warm) {
      // Warm workers are replaced until the session is over.
      if (outcome.final) return outcome.exit_code;
      say(context.stderr_fd, "accel-run: starting new workers\n");
      continue;
    }
    if (outcome.exit_code == 0 || outcome.final || round >= options.max_restarts) {
      return outcome.exit_code;
    }
    say(context.stderr_fd, "accel-run: restarting all workers (restart " +
                               std::to_string(round + 1) + " of " +
                               std::to_string(options.max_restarts) + ")\n");
  }
}

int run_warm_subcommand(const std::vector<std::string>& args, const RunContext& context, const std::string& name,
                        std::string (*no_recipe)(const std::string& word), bool LaunchOptions::*mode) {
  LaunchOptions options;
  try {
    options = resolve_launch_options(args, ConfigLookup::from_environment(), usable_cpu_cores(), RecipeRule::none);
    if (!options.recipe.empty()) throw LaunchOptionsError(no_recipe(options.recipe));
    if (options.nnodes > 1 || options.backend == "mpi" || options.watch || options.max_restarts > 0) {
      throw LaunchOptionsError("accel-run " + name +
                               " runs on one machine over gloo, without --watch or --max-restarts");
    }
  } catch (const LaunchOptionsError& error) {
    std::fprintf(stderr, "accel-run: error: %s\n", error.what());
    return 2;
  }
  if (options.help) {
    std::fputs(usage_text().c_str(), stdout);
    return 0;
  }
  // The workers' command line names a recipe they never run.
  options.recipe = name;
  options.*mode = true;
  return run_recipe(options, context);
}

}  // namespace accel
