#include "engine/launch/serve_controller.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <stdexcept>

#include "engine/launch/failure_report.h"
#include "engine/launch/serve_session.h"
#include "engine/protocol/fd_passing.h"

namespace accel {

ServeController::ServeController(ServeSession& session, std::vector<int> sockets, int out_fd,
                                 const LiveChannel* live)
    : session_(session), out_fd_(out_fd), live_(live) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    for (int fd : sockets) ::close(fd);
    throw std::runtime_error("cannot create the serve controller's pipe");
  }
  wake_read_ = fds[0];
  wake_write_ = fds[1];
  ranks_.resize(sockets.size());
  for (size_t r = 0; r < ranks_.size(); ++r) ranks_[r].fd = sockets[r];
  thread_ = std::thread([this] { serve(); });
}

ServeController::~ServeController() { finish(); }

std::optional<WarmController::Stop> ServeController::stop() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stop_;
}

void ServeController::finish() {
  if (!thread_.joinable()) return;
  write_all(wake_write_, "x");
  thread_.join();
  control_.reset();
  // The ranks' last lines of a run the workers ended in.
  for (OutputRelay& relay : relays_) relay.finish(Clock::now() + std::chrono::seconds(1));
  relays_.clear();
  for (Rank& rank : ranks_) ::close(rank.fd);
  ::close(wake_read_);
  ::close(wake_write_);
}

void ServeController::request_stop(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!stop_) stop_ = Stop{reason};
}

// Rank 0 writes to the submitter's streams itself; each other rank to a
// pipe of this run's, relayed with its prefix. The worker holds the pipes'
// write ends for the run only.
void ServeController::start_run(ServedRun& run) {
  running_ = &run;
  number_ = ++session_.served;
  first_failure_.reset();
  // Before the ranks start: their first step boundary finds the run's keys.
  if (live_) control_ = live_->open(number_, run.request.recipe, run.request.cwd, run.err);
  if (control_ && ::isatty(run.err)) {
    write_all(run.err, "accel-run: run " + control_->id() + " (steer it: accel-run attach " + control_->id() + ")\n");
  }
  const std::string command = encode_warm_command({"run", encode_run_request(run.request)});
  for (size_t r = 0; r < ranks_.size(); ++r) {
    Rank& rank = ranks_[r];
    rank.outcome.reset();
    if (r == 0) {
      if (!send_with_fds(rank.fd, command, {run.out, run.err})) request_stop("rank 0's worker is gone");
      continue;
    }
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("cannot create a pipe for a served run");
    if (::pipe2(err, O_CLOEXEC) != 0) {
      ::close(out[0]);
      ::close(out[1]);
      throw std::runtime_error("cannot create a pipe for a served run");
    }
    const std::string prefix = "[rank " + std::to_string(r) + "] ";
    relays_.emplace_back(out[0], run.out, prefix);
    relays_.emplace_back(err[0], run.err, prefix);
    if (!send_with_fds(rank.fd, command, {out[1], err[1]})) request_stop("rank " + std::to_string(r) + "'s worker is gone");
    ::close(out[1]);
    ::close(err[1]);
  }
}

// everyone: every rank gave its outcome; else the failure grace ran out.
void ServeController::conclude_run(bool everyone) {
  // The workers wrote their output before their outcomes: what the pipes
  // hold is the rest of it.
  for (OutputRelay& relay : relays_) relay.finish(Clock::now() + std::chrono::seconds(1));
  relays_.clear();
  ServedRun& run = *running_;
  running_ = nullptr;
  control_.reset();
  const std::string name = "run " + std::to_string(number_) + " (" + run.request.recipe + ")";
  if (!first_failure_) {
    write_all(out_fd_, "accel-run: " + name + " finished\n");
    session_.end_current(0);
    return;
  }
  const size_t culprit = culprit_;
  const WarmMessage& failed = *ranks_[culprit].outcome;
  std::string report = "accel-run: rank " + std::to_string(culprit) + " failed\n" + quoted_error_text(failed.text, "  ");
  bool in_step = everyone;
  for (size_t r = 0; r < ranks_.size(); ++r) {
    if (r == culprit) continue;
    const std::optional<WarmMessage>& outcome = ranks_[r].outcome;
    if (!outcome) {
      report += "accel-run: rank " + std::to_string(r) + " did not end the run: it waits for rank " +
                std::to_string(culprit) + "\n";
      continue;
    }
    if (outcome->number != failed.number) in_step = false;
    if (outcome->kind == WarmMessage::Kind::ok) continue;
    report += "accel-run: rank " + std::to_string(r) + " failed too";
    report += outcome->text == failed.text ? ", with the same error\n" : ":\n" + quoted_error_text(outcome->text, "  ");
  }
  write_all(run.err, report);
  session_.end_current(1);
  write_all(out_fd_, "accel-run: " + name + " failed (exit status 1)\n");
  if (!in_step) request_stop("the ranks are not in step after the failure of " + name);
}

void ServeController::read_rank(size_t r) {
  const WarmRead read = read_warm_rank(ranks_[r], r);
  if (read.failed && !first_failure_) {
    first_failure_ = Clock::now();
    culprit_ = r;
  }
  if (read.stop) request_stop(*read.stop);
}

void ServeController::serve() {
  std::vector<pollfd> fds;
  for (;;) {
    // [0] wake, [1] the queue, [2] the submitter of the run going, then the
    // ranks, then each relay's pipe and stream.
    const bool idle = !running_ && std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.ready; });
    fds.assign({pollfd{wake_read_, POLLIN, 0}, pollfd{idle ? session_.queued_fd() : -1, POLLIN, 0},
                pollfd{running_ ? running_->client : -1, POLLIN, 0}});
    for (Rank& rank : ranks_) fds.push_back(pollfd{rank.open ? rank.fd : -1, POLLIN, 0});
    for (OutputRelay& relay : relays_) {
      fds.push_back(pollfd{relay.fd(), POLLIN, 0});
      fds.push_back(pollfd{relay.out_fd(), POLLOUT, 0});
    }
    int timeout = -1;
    if (running_ && first_failure_) {
      timeout = static_cast<int>(std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(
                                                          *first_failure_ + failure_grace_ - Clock::now()).count()));
    }
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) return;
    if (fds[0].revents != 0) return;
    if (running_ && fds[2].revents != 0 && running_->gone()) {
      // Ctrl-C on submit: the run stops with it, as a cold run would.
      request_stop("the submitter of run " + std::to_string(number_) + " left");
      return;
    }
    for (size_t r = 0; r < ranks_.size(); ++r) {
      if (fds[3 + r].revents != 0) read_rank(r);
    }
    for (size_t i = 0; i < relays_.size(); ++i) {
      const size_t at = 3 + ranks_.size() + 2 * i;
      if (fds[at].revents != 0) relays_[i].pump();
      if (fds[at + 1].revents != 0) relays_[i].send();
    }
    if (stop()) return;
    if (running_) {
      const bool everyone =
          std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.outcome.has_value(); });
      if (everyone || (first_failure_ && Clock::now() >= *first_failure_ + failure_grace_)) conclude_run(everyone);
    }
    const bool ready = std::all_of(ranks_.begin(), ranks_.end(), [](const Rank& rank) { return rank.ready; });
    if (!running_ && ready && !stop()) {
      if (ServedRun* run = session_.begin_next()) {
        try {
          start_run(*run);
        } catch (const std::exception& error) {
          // The workers may hold part of the run: new ones take the next.
          write_all(run->err, std::string("accel-run: ") + error.what() + "\n");
          request_stop(error.what());
          return;
        }
      }
    }
  }
}

}  // namespace accel
