#include "engine/launch/repl_controller.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

// readline's headers use FILE without including stdio.h.
#include <readline/history.h>
#include <readline/readline.h>

#include "engine/launch/failure_report.h"
#include "engine/launch/live_channel.h"
#include "engine/launch/output_relay.h"
#include "engine/protocol/warm_protocol.h"

namespace accel {
namespace {

constexpr const char* kPrompt = "accel> ";
constexpr const char* kMorePrompt = "...> ";

// readline's callback interface hands a whole line to a plain function.
std::optional<std::string>* g_line = nullptr;  // where the callback leaves it
bool g_line_ready = false;

void take_line(char* line) {
  // Removed at once: else readline shows the next prompt before the chunk
  // has run, and the ranks' output lands on it.
  rl_callback_handler_remove();
  g_line_ready = true;
  if (line) *g_line = std::string(line); else g_line->reset();  // nullptr: Ctrl-D
  std::free(line);
}

bool is_blank(const std::string& text) { return text.find_first_not_of(" \t\n") == std::string::npos; }

// A chunk of several lines as one history line, so that Up recalls it
// whole (and the history file keeps it whole): to Lua a line break is a
// space, except in a comment or a long string, which keep theirs.
std::string history_entry(const std::string& chunk) {
  if (chunk.find("--") != std::string::npos || chunk.find('[') != std::string::npos) return chunk;
  std::string line = chunk;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  return line;
}

}  // namespace

class ReplController final : public WarmController {
 public:
  // `live`: the session's chunks run in one Lua state, so a training loop
  // started in one chunk is one run to steer for as long as the workers live.
  ReplController(ReplSession& session, std::vector<int> sockets, int out_fd, const LiveChannel* live)
      : session_(session), sockets_(std::move(sockets)), out_fd_(out_fd),
        pids_(sockets_.size(), 0), readers_(sockets_.size()),
        control_(live ? live->open(1, "", "", out_fd) : nullptr) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
      for (int fd : sockets_) ::close(fd);
      throw std::runtime_error("cannot create the REPL's pipe");
    }
    wake_read_ = fds[0];
    wake_write_ = fds[1];
    thread_ = std::thread([this] { serve(); });
  }
  ~ReplController() override { finish(); }

  std::optional<Stop> stop() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stop_;
  }

  std::vector<int> idle_ranks() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_;
  }

  bool interrupt() override {
    write_all(wake_write_, "i");
    return true;
  }

  void finish() override {
    if (!thread_.joinable()) return;
    write_all(wake_write_, "q");
    thread_.join();
    control_.reset();
    for (int fd : sockets_) ::close(fd);
    ::close(wake_read_);
    ::close(wake_write_);
  }

 private:
  enum class Wake { none, interrupt, quit, timeout };
  using Clock = std::chrono::steady_clock;

  // How long a chunk has to stop after Ctrl-C. A loop LuaJIT has compiled
  // and that calls no C function never runs the interrupt hook; past this
  // the workers are replaced, as a notebook restarts a kernel that ignores
  // its interrupt.
  static constexpr std::chrono::seconds kInterruptGrace{3};

  // The ranks that answered while others have not: published for the
  // supervising thread's stall watch (idle_ranks).
  void note_idle(const std::vector<size_t>& ranks, const std::vector<std::optional<WarmMessage>>& answers) {
    std::vector<int> idle;
    bool someone_busy = false;
    for (size_t r : ranks) {
      if (answers[r]) {
        idle.push_back(static_cast<int>(r));
      } else {
        someone_busy = true;
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    idle_ = someone_busy ? idle : std::vector<int>{};
  }

  void request_stop(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stop_) stop_ = Stop{reason};
  }

  // Ends the session: idle workers see their sockets close and exit; busy
  // ones are stopped by the supervisor.
  void leave(bool busy) {
    session_.over_ = true;
    if (busy) {
      request_stop("leaving the REPL");
    } else {
      for (int fd : sockets_) ::shutdown(fd, SHUT_WR);
    }
  }

  Wake drain_wake() {
    Wake wake = Wake::none;
    char bytes[16];
    ssize_t n;
    while ((n = ::read(wake_read_, bytes, sizeof bytes)) > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        if (bytes[i] == 'q') return Wake::quit;
        wake = Wake::interrupt;
      }
    }
    return wake;
  }

  // Waits for one message from each of `ranks`, into `answers`; stops
  // early on a wake (returned), at `deadline` (Wake::timeout), or when a
  // rank's socket closes (`closed`: see worker_ended).
  Wake collect(const std::vector<size_t>& ranks, std::vector<std::optional<WarmMessage>>& answers,
               bool* closed, std::optional<Clock::time_point> deadline = std::nullopt) {
    *closed = false;
    for (;;) {
      bool all = true;
      for (size_t r : ranks) all = all && answers[r].has_value();
      if (all) return Wake::none;
      std::vector<pollfd> fds{pollfd{wake_read_, POLLIN, 0}};
      for (size_t r : ranks) fds.push_back(pollfd{answers[r] ? -1 : sockets_[r], POLLIN, 0});
      int wait_ms = -1;
      if (deadline) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
        if (left.count() <= 0) return Wake::timeout;
        wait_ms = static_cast<int>(left.count());
      }
      if (::poll(fds.data(), fds.size(), wait_ms) < 0 && errno != EINTR) return Wake::quit;
      if (fds[0].revents != 0) {
        Wake wake = drain_wake();
        if (wake != Wake::none) return wake;
      }
      for (size_t i = 0; i < ranks.size(); ++i) {
        const size_t r = ranks[i];
        if (fds[i + 1].revents == 0) continue;
        char buffer[4096];
        const ssize_t n = ::read(sockets_[r], buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          *closed = true;
          worker_ended(r);
          return Wake::none;
        }
        readers_[r].feed(buffer, static_cast<size_t>(n));
        if (std::optional<WarmMessage> message = readers_[r].next_message()) {
          answers[r] = std::move(message);
          note_idle(ranks, answers);
        }
      }
    }
  }

  // A worker whose socket closed has ended: killed or failed, which the
  // supervisor reports, or by os.exit, which ends a REPL rank's worker as
  // it ends a script while the others wait for their next chunk. That the
  // supervisor lets be, so the stop comes from here, naming the rank.
  void worker_ended(size_t rank) {
    request_stop("rank " + std::to_string(rank) + "'s worker ended (os.exit ends a rank's worker)");
  }

  std::vector<size_t> all_ranks() const {
    std::vector<size_t> ranks;
    for (size_t r = 0; r < sockets_.size(); ++r) ranks.push_back(r);
    return ranks;
  }

  std::string label(size_t rank) const {
    return sockets_.size() > 1 ? "[rank " + std::to_string(rank) + "] " : "";
  }

  // Prints what each rank answered; false when the ranks are no longer in
  // step (they ran different numbers of collectives).
  bool report(const std::vector<std::optional<WarmMessage>>& answers) {
    std::string values, errors;
    std::optional<std::string> first_error;
    for (size_t r = 0; r < answers.size(); ++r) {
      const WarmMessage& answer = *answers[r];
      if (answer.kind == WarmMessage::Kind::ok) {
        if (!answer.text.empty()) values += label(r) + answer.text + "\n";
      } else if (first_error && *first_error == answer.text) {
        errors += label(r) + "the same error\n";
      } else {
        if (!first_error) first_error = answer.text;
        errors += quoted_error_text(answer.text, label(r));
      }
    }
    std::fflush(stdout);
    write_all(STDOUT_FILENO, values);
    write_all(out_fd_, errors);
    for (const auto& answer : answers) {
      if (answer->number != answers[0]->number) return false;
    }
    return true;
  }

  // Runs a chunk on every rank; false when the session cannot go on with
  // these workers.
  bool run_chunk(const std::string& chunk) {
    ++session_.served;
    for (int fd : sockets_) write_all(fd, encode_warm_command({"chunk", chunk}));
    std::vector<std::optional<WarmMessage>> answers(sockets_.size());
    std::optional<Clock::time_point> interrupted;
    for (;;) {
      bool closed = false;
      const Wake wake = collect(all_ranks(), answers, &closed,
                                interrupted ? std::optional(*interrupted + kInterruptGrace) : std::nullopt);
      if (closed) return false;  // the supervisor reports the worker that died
      if (wake == Wake::quit) return false;
      if (wake == Wake::none) break;
      if (wake == Wake::timeout) {
        write_all(out_fd_, "accel-run: the chunk did not stop within " + std::to_string(kInterruptGrace.count()) +
                               " s of Ctrl-C; starting new workers (the session's state is lost)\n");
        request_stop("the chunk did not stop after Ctrl-C");
        return false;
      }
      if (interrupted) {  // a second Ctrl-C
        leave(true);
        return false;
      }
      interrupted = Clock::now();
      for (pid_t pid : pids_) ::kill(pid, SIGINT);
      write_all(out_fd_, "\naccel-run: interrupting the chunk on every rank (Ctrl-C again leaves)\n");
    }
    if (report(answers)) return true;
    write_all(out_fd_,
              "accel-run: the ranks ran different numbers of collectives in that chunk; starting new workers "
              "(the session's state is lost)\n");
    request_stop("the ranks are not in step after a chunk");
    return false;
  }

  // Whether `text` is a whole chunk, as rank 0's Lua compiler sees it.
  std::optional<bool> complete(const std::string& text) {
    write_all(sockets_[0], encode_warm_command({"check", text}));
    std::vector<std::optional<WarmMessage>> answers(sockets_.size());
    bool closed = false;
    Wake wake;
    // A check takes a moment: a Ctrl-C meanwhile is not worth acting on.
    while ((wake = collect({0}, answers, &closed)) == Wake::interrupt) {
    }
    if (wake == Wake::quit || closed) return std::nullopt;
    return answers[0]->kind != WarmMessage::Kind::more;
  }

  void serve() {
    // Every worker says it is ready, with its pid (for interrupts).
    std::vector<std::optional<WarmMessage>> ready(sockets_.size());
    bool closed = false;
    if (collect(all_ranks(), ready, &closed) != Wake::none || closed) return;
    for (size_t r = 0; r < ready.size(); ++r) pids_[r] = static_cast<pid_t>(ready[r]->number);
    if (++session_.sets_ == 1) {
      write_all(out_fd_, "accel-run: Lua on " + std::to_string(sockets_.size()) +
                             " rank(s); =expr prints each rank's value; Ctrl-D leaves\n");
    }

    std::optional<std::string> line;
    g_line = &line;
    rl_catch_signals = 0;  // the launcher's own handlers see SIGINT
    rl_catch_sigwinch = 0;
    std::string chunk;
    bool prompting = false;
    auto prompt = [&](const char* text) {
      rl_callback_handler_install(text, take_line);
      prompting = true;
    };
    auto unprompt = [&] {
      if (prompting) rl_callback_handler_remove();
      prompting = false;
    };
    prompt(kPrompt);
    for (;;) {
      pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {wake_read_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 && errno != EINTR) break;
      if (fds[1].revents != 0) {
        const Wake wake = drain_wake();
        if (wake == Wake::quit) break;
        if (wake == Wake::interrupt) {
          if (chunk.empty() && (!rl_line_buffer || !*rl_line_buffer)) {
            unprompt();
            write_all(STDOUT_FILENO, "\n");
            leave(false);
            break;
          }
          // Ctrl-C with a line typed: drop it, as shells do (the line stays
          // on the screen; the cursor is at its start once readline lets go).
          chunk.clear();
          rl_replace_line("", 0);
          unprompt();
          write_all(STDOUT_FILENO, "\n");
          prompt(kPrompt);
        }
        continue;
      }
      if (fds[0].revents == 0) continue;
      g_line_ready = false;
      rl_callback_read_char();
      if (!g_line_ready) continue;
      prompting = false;  // take_line removed the handler
      if (!line) {  // Ctrl-D
        unprompt();
        write_all(STDOUT_FILENO, "\n");
        leave(false);
        break;
      }
      chunk += chunk.empty() ? *line : "\n" + *line;
      if (is_blank(chunk)) {
        chunk.clear();
        prompt(kPrompt);
        continue;
      }
      const std::optional<bool> whole = complete(chunk);
      if (!whole) break;
      if (!*whole) {
        prompt(kMorePrompt);
        continue;
      }
      add_history(history_entry(chunk).c_str());
      const bool go_on = run_chunk(chunk);
      chunk.clear();
      if (!go_on) break;
      prompt(kPrompt);
    }
    unprompt();
    g_line = nullptr;
  }

  ReplSession& session_;
  std::vector<int> sockets_;
  int out_fd_;
  std::vector<pid_t> pids_;
  std::vector<WarmFrameReader> readers_;
  std::unique_ptr<LiveRun> control_;
  int wake_read_ = -1;
  int wake_write_ = -1;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::optional<Stop> stop_;
  std::vector<int> idle_;  // under mutex_
};

namespace {

// Chunks the history keeps: the file holds the last ones, not every chunk
// ever typed.
constexpr int kHistoryChunks = 1000;

// Whether `file` can hold the history: a regular file, or nothing yet. A
// FIFO would block start-up until someone wrote to it, a device or folder
// is no place for it. Otherwise says why (`why`).
bool history_file_usable(const std::string& file, std::string* why) {
  struct stat info {};
  if (::stat(file.c_str(), &info) != 0) {
    if (errno == ENOENT) return true;
    *why = std::strerror(errno);
    return false;
  }
  if (S_ISREG(info.st_mode)) return true;
  *why = S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISDIR(info.st_mode) ? "a folder" : "not a regular file";
  return false;
}

}  // namespace

ReplSession::ReplSession(std::string history_file, int report_fd) : history_file_(std::move(history_file)) {
  using_history();
  stifle_history(kHistoryChunks);
  std::string why;
  if (history_file_.empty()) return;
  if (!history_file_usable(history_file_, &why)) {
    write_all(report_fd, "accel-run: the REPL's history file " + history_file_ + " is " + why +
                             ": no history is read or kept\n");
    history_file_.clear();
    return;
  }
  read_history(history_file_.c_str());
}

ReplSession::~ReplSession() {
  std::string why;
  if (history_file_.empty() || !history_file_usable(history_file_, &why)) return;
  write_history(history_file_.c_str());
}

std::unique_ptr<WarmController> ReplSession::start(std::vector<int> sockets, int out_fd, const LiveChannel* live) {
  if (sets_ > 0) write_all(out_fd, "accel-run: new workers: the session's state is lost\n");
  return std::make_unique<ReplController>(*this, std::move(sockets), out_fd, live);
}

}  // namespace accel
