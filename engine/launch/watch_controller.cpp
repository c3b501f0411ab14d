#include "engine/launch/watch_controller.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/launch/failure_report.h"
#include "engine/launch/output_relay.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {

using Clock = std::chrono::steady_clock;

namespace {

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

WatchController::WatchController(WatchControllerOptions options) : options_(std::move(options)) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    for (int fd : options_.sockets) ::close(fd);
    throw std::runtime_error("cannot create the watch controller's pipe");
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  ranks_.resize(options_.sockets.size());
  for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r].fd = options_.sockets[r];
  pending_ = *options_.run_due;
  thread_ = std::thread([this] { serve(); });
}

WatchController::~WatchController() { finish(); }

std::optional<WarmController::Stop> WatchController::stop() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_;
}

void WatchController::finish() {
  if (!thread_.joinable()) return;
  write_all(wake_write_, "x");
  thread_.join();
  control_.reset();
  for (Rank& rank : ranks_) ::close(rank.fd);
  ::close(wake_read_);
  ::close(wake_write_);
  *options_.run_due = pending_;
}

namespace {

std::string working_directory() {
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) {
    throw std::runtime_error(std::string("cannot name the working directory: ") + std::strerror(errno));
  }
  return cwd;
}

}  // namespace

WatchSession::WatchSession(const std::string& recipe) : WatchSession(recipe, working_directory()) {}

WatchSession::WatchSession(const std::string& recipe, const std::string& launch_dir) : sources_(recipe, launch_dir) {
  history_.launch_dir = launch_dir;
}

std::unique_ptr<WarmController> WatchSession::start(std::vector<int> sockets, int out_fd, const LiveChannel* live) {
  WatchControllerOptions options;
  options.sources = &sources_;
  options.history = &history_;
  options.sockets = std::move(sockets);
  options.out_fd = out_fd;
  options.run_due = &run_due_;
  options.runs = &served;
  options.live = live;
  return std::make_unique<WatchController>(std::move(options));
}

void WatchController::say(const std::string& text) const { write_all(options_.out_fd, text); }

void WatchController::request_stop(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!stop_) stop_ = Stop{reason};
}

void WatchController::handle_change(const std::string& file, bool during_run) {
  WatchHistory& history = *options_.history;
  if (during_run) {
    const int run = *options_.runs;
    const auto& written = history.written_by_runs;
    if (std::find(written.begin(), written.end(), file) != written.end()) return;
    // The same file changed during the run before too: the recipe writes it.
    // Rerunning for it would go on for ever; say so once and let it be.
    if (history.during_run_file == file && history.during_run == run - 1) {
      history.written_by_runs.push_back(file);
      say("accel-run: " + file + " changed during run " + std::to_string(run - 1) + " and again during run " +
          std::to_string(run) + ": the recipe seems to write it, so its changes during runs no longer rerun it "
          "(write such files outside the recipe's folder)\n");
      return;
    }
    history.during_run_file = file;
    history.during_run = run;
  }
  changed_file_ = file;
  pending_ = true;
  // The run in progress computes what the file no longer says; its ranks
  // may be anywhere in their collectives, so new workers take over.
  if (running_) {
    request_stop(file + " changed during run " + std::to_string(*options_.runs));
  }
}

// The recipe's folder deleted or moved away: said once, then its path is
// watched for again (every half second, see serve). The same folder back
// there counts as a save of the recipe (true). A new folder made there
// gets new workers: the warm ones may work in the deleted one, as may the
// launcher, which moves to the new folder of its own path first.
bool WatchController::check_folder() {
  SourceWatcher& sources = *options_.sources;
  WatchHistory& history = *options_.history;
  if (!sources.lost()) return false;
  if (!history.said_lost) {
    history.said_lost = true;
    say("accel-run: the recipe's folder " + sources.folder() +
        " was deleted or moved away; watching for a folder there again\n");
  }
  if (!sources.rewatch()) return false;
  history.said_lost = false;
  if (!sources.recreated()) {
    say("accel-run: " + sources.folder() + " is there again; watching it\n");
    return true;
  }
  struct stat here {};
  if (::stat(".", &here) == 0 && here.st_nlink == 0 && ::chdir(history.launch_dir.c_str()) != 0) {
    request_stop("the launcher's working directory " + history.launch_dir + " was deleted");
    return false;
  }
  say("accel-run: " + sources.folder() + " was made again; watching it\n");
  changed_file_ = sources.folder();
  pending_ = true;
  request_stop(sources.folder() + " was made again");
  return false;
}

void WatchController::start_run() {
  pending_ = false;
  running_ = true;
  first_failure_.reset();
  ++*options_.runs;
  if (!changed_file_.empty()) {
    say("accel-run: run " + std::to_string(*options_.runs) + ": " + changed_file_ + " changed\n");
  }
  started_ = Clock::now();
  // Before the ranks start: their first step boundary finds the run's keys.
  if (options_.live) control_ = options_.live->open(*options_.runs, "", "", options_.out_fd);
  for (Rank& rank : ranks_) {
    rank.outcome.reset();
    write_all(rank.fd, encode_warm_command({"run", ""}));
  }
}

// everyone: every rank reported; else the failure grace ran out.
void WatchController::conclude_run(bool everyone) {
  running_ = false;
  control_.reset();
  const std::string run = "run " + std::to_string(*options_.runs);
  if (!first_failure_) {
    say("accel-run: " + run + " finished in " + seconds_text(Clock::now() - started_) + " s; watching " +
        options_.sources->folder() + " for saved Lua files (Ctrl-C ends)\n");
    return;
  }
  // The culprit is the rank whose failure came first; its peers may only
  // have failed because of it.
  const size_t culprit = culprit_;
  const std::string& error = ranks_[culprit].outcome->text;
  std::string report =
      "accel-run: rank " + std::to_string(culprit) + " failed in " + run + "\n" + quoted_error_text(error, "  ");
  bool in_step = everyone;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (r == culprit) continue;
    const std::optional<WarmMessage>& outcome = ranks_[r].outcome;
    if (!outcome) {
      report += "accel-run: rank " + std::to_string(r) + " did not end " + run + ": it waits for rank " +
                std::to_string(culprit) + "\n";
      continue;
    }
    if (outcome->number != ranks_[culprit].outcome->number) in_step = false;
    if (outcome->kind == WarmMessage::Kind::ok) continue;
    report += "accel-run: rank " + std::to_string(r) + " failed too";
    report += outcome->text == error ? ", with the same error\n" : ":\n" + quoted_error_text(outcome->text, "  ");
  }
  say(report);
  if (in_step) {
    say("accel-run: the workers stay warm; save a Lua file in " + options_.sources->folder() + " to rerun\n");
  } else {
    request_stop("the ranks are not in step after the failure of " + run);
  }
}

void WatchController::serve() {
  std::optional<Clock::time_point> debounce_at;
  std::string last_changed;
  // Whether the last save came while a run was going: a recipe's write at
  // its very end is its run's, even when the debounce ends after the run.
  bool last_during_run = false;
  std::vector<pollfd> fds;
  for (;;) {
    fds.assign({pollfd{wake_read_, POLLIN, 0}, pollfd{options_.sources->fd(), POLLIN, 0}});
    for (Rank& rank : ranks_) fds.push_back(pollfd{rank.open ? rank.fd : -1, POLLIN, 0});
    std::optional<Clock::time_point> deadline = debounce_at;
    if (running_ && first_failure_) {
      const Clock::time_point give_up = *first_failure_ + options_.failure_grace;
      if (!deadline || give_up < *deadline) deadline = give_up;
    }
    int timeout = -1;
    if (deadline) {
      timeout = static_cast<int>(std::max<int64_t>(
          0, std::chrono::ceil<std::chrono::milliseconds>(*deadline - Clock::now()).count()));
    }
    // The folder's path is looked at twice a second (check_folder).
    if (timeout < 0 || timeout > 500) timeout = 500;
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (fds[1].revents != 0) {
      std::vector<std::string> changed = options_.sources->drain();
      if (!changed.empty()) {
        last_changed = changed.back();
        last_during_run = running_;
        debounce_at = Clock::now() + options_.debounce;
      }
    }
    if (check_folder()) {
      last_changed = options_.sources->folder();
      last_during_run = false;
      debounce_at = Clock::now() + options_.debounce;
    }
    if (debounce_at && Clock::now() >= *debounce_at) {
      debounce_at.reset();
      handle_change(last_changed, last_during_run);
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (fds[r + 2].revents == 0) continue;
      const WarmRead read = read_warm_rank(ranks_[r], r);
      if (read.failed && !first_failure_) {
        first_failure_ = Clock::now();
        culprit_ = r;
      }
      if (read.stop) request_stop(*read.stop);
    }
    if (running_) {
      const bool everyone = std::all_of(ranks_.begin(), ranks_.end(),
                                        [](const Rank& rank) { return rank.outcome.has_value(); });
      if (everyone || (first_failure_ && Clock::now() >= *first_failure_ + options_.failure_grace)) {
        conclude_run(everyone);
      }
    }
    const bool all_ready =
        std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.ready; });
    if (!running_ && pending_ && all_ready && !stop()) start_run();
  }
}

}  // namespace accel
