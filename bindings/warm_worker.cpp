#include "bindings/warm_worker.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GeneratorImpl.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
}

#include "bindings/end_of_run.h"
#include "bindings/kept_weights.h"
#include "bindings/distributed_ops.h"
#include "bindings/error_log.h"
#include "bindings/lua_random.h"
#include "bindings/worker_state.h"
#include "engine/comm/communicator.h"
#include "engine/protocol/launch_options.h"
#include "engine/protocol/process_stat.h"
#include "engine/protocol/fd_passing.h"
#include "engine/protocol/warm_protocol.h"
#include "engine/tracking/open_trackers.h"

namespace accel::lua {
namespace {

// What a run may have changed outside its Lua state goes back to how a new
// process starts, so that every run of a warm worker equals a cold one:
// LibTorch's generator (a new process seeds it at random, as PyTorch's
// does: only a recipe's own seed makes runs repeat), Lua's (seeded with 0),
// the thread count, the default dtype, gradient mode (a failed run may
// have left a no_grad region).
void reset_process(const LaunchOptions& options) {
  at::manual_seed(c10::detail::getNonDeterministicRandom());
  reset_math_random();
  at::set_num_threads(options.threads);
  c10::set_default_dtype(caffe2::TypeMeta::Make<float>());
  at::GradMode::set_enabled(true);
}

void send_to_launcher(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::_Exit(0);  // the launcher is gone, and this worker with it
    done += static_cast<size_t>(n);
  }
}

// The launcher's next command; nothing when it has gone. Descriptors sent
// with it (a served run's streams) are added to `fds`.
std::optional<WarmCommand> next_command(int fd, WarmFrameReader& reader, std::vector<int>& fds) {
  for (;;) {
    if (std::optional<WarmCommand> command = reader.next_command()) return command;
    char buffer[4096];
    const ssize_t n = receive_with_fds(fd, buffer, sizeof buffer, fds);
    if (n <= 0) return std::nullopt;
    reader.feed(buffer, static_cast<size_t>(n));
  }
}

// ---- accel-run repl: chunks in one Lua state, interrupted by SIGINT -------

lua_State* g_repl_state = nullptr;

void interrupt_hook(lua_State* L, lua_Debug*) {
  lua_sethook(L, nullptr, 0, 0);
  luaL_error(L, "interrupted");
}

// As lua.c does: the next Lua instruction the chunk runs raises
// "interrupted" (code compiled by the JIT, or a C call in progress, such as
// a collective, finishes first).
void on_repl_interrupt(int) {
  if (g_repl_state) lua_sethook(g_repl_state, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

// The session's state, made on the first chunk: accel loaded as for a
// recipe, globals strict.
lua_State* repl_state(const LaunchOptions& options, CommunicatorOptions* comm_options,
                      const std::string& lua_dir) {
  if (g_repl_state) return g_repl_state;
  lua_State* L = new_worker_state(options, comm_options, lua_dir);
  if (!load_accel(L, 0)) exit_with_error(lua_tostring(L, -1));
  struct sigaction interrupt {};
  interrupt.sa_handler = on_repl_interrupt;
  interrupt.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &interrupt, nullptr);
  g_repl_state = L;
  return L;
}

// "=expr" is "return expr", as in Lua's own prompt.
std::string chunk_source(const std::string& text) {
  return !text.empty() && text[0] == '=' ? "return " + text.substr(1) : text;
}

// A REPL chunk as a function on the stack, or the error. Text only: a
// chunk that begins as LuaJIT bytecode would run unverified.
int load_chunk(lua_State* L, const std::string& source) {
  return luaL_loadbufferx(L, source.data(), source.size(), "=repl", "t");
}

// Whether `text` is a whole chunk: it compiles, or fails for another
// reason than ending too soon (that error is the chunk's to report).
WarmMessage check_chunk(lua_State* L, const std::string& text) {
  const std::string source = chunk_source(text);
  WarmMessage answer{WarmMessage::Kind::ok, 0, ""};
  if (load_chunk(L, source) == LUA_ERRSYNTAX) {
    const std::string error = lua_tostring(L, -1);
    const std::string eof = "'<eof>'";
    if (error.size() >= eof.size() && error.compare(error.size() - eof.size(), eof.size(), eof) == 0) {
      answer.kind = WarmMessage::Kind::more;
    }
  }
  lua_settop(L, 0);
  return answer;
}

// Runs a chunk; its values, tab-separated, are the answer's text.
WarmMessage run_chunk(lua_State* L, const std::string& text) {
  const std::string source = chunk_source(text);
  lua_settop(L, 0);
  lua_pushcfunction(L, traceback);
  WarmMessage answer{WarmMessage::Kind::ok, 0, ""};
  lua_sethook(L, nullptr, 0, 0);
  if (load_chunk(L, source) != 0 || lua_pcall(L, 0, LUA_MULTRET, 1) != 0) {
    if (is_end_of_run(L, -1)) {  // a `stop` sent to a loop the chunk ran
      lua_settop(L, 0);
      return answer;
    }
    answer.kind = WarmMessage::Kind::failed;
    answer.text = lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)";
  } else {
    for (int i = 2; i <= lua_gettop(L); ++i) {
      lua_getglobal(L, "tostring");
      lua_pushvalue(L, i);
      if (lua_pcall(L, 1, 1, 0) != 0 || !lua_isstring(L, -1)) {
        answer.text += i > 2 ? "\t?" : "?";
      } else {
        answer.text += (i > 2 ? "\t" : "") + std::string(lua_tostring(L, -1));
      }
      lua_pop(L, 1);
    }
  }
  lua_sethook(L, nullptr, 0, 0);
  lua_settop(L, 0);
  return answer;
}

// Ends every other process of this worker's process group: what the run
// started and left behind (`os.execute("cmd &")`), which a cold run's end
// takes with it when the launcher stops the group. The worker leads its
// group (the supervisor's setsid), so it stays.
void end_leftovers() {
  const pid_t self = ::getpid();
  const pid_t group = ::getpgrp();
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == self) continue;
    // A process of the machine may end between readdir and the read.
    const std::string text = process_stat(pid);
    // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(text.substr(close + 1));
    std::string state;
    long ppid = 0, pgrp = 0;
    if (fields >> state >> ppid >> pgrp && pgrp == group) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
  ::closedir(proc);
}

// Where a served run (accel-run serve) happens: in the folder it was
// submitted from, writing to the streams that came with it; the worker's
// own folder and streams are back once it ends.
class ServedRunScope {
 public:
  // `streams`: the run's stdout and stderr, owned from here on.
  ServedRunScope(const RunRequest& request, const std::vector<int>& streams) {
    std::fflush(nullptr);
    home_ = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    saved_out_ = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    saved_err_ = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    ::dup2(streams[0], STDOUT_FILENO);
    ::dup2(streams[1], STDERR_FILENO);
    for (int fd : streams) ::close(fd);
    if (::chdir(request.cwd.c_str()) != 0) {
      error_ = "accel-run: cannot enter " + request.cwd + ", where the recipe was submitted from: " +
               std::strerror(errno);
    }
  }
  ~ServedRunScope() {
    std::fflush(nullptr);
    // The run's streams close here: the serve sees their ends once the run is over.
    ::dup2(saved_out_, STDOUT_FILENO);
    ::dup2(saved_err_, STDERR_FILENO);
    ::close(saved_out_);
    ::close(saved_err_);
    if (home_ >= 0 && ::fchdir(home_) != 0) std::_Exit(1);  // a worker in a folder of no one's choosing
    ::close(home_);
  }
  ServedRunScope(const ServedRunScope&) = delete;
  ServedRunScope& operator=(const ServedRunScope&) = delete;
  const std::string& error() const { return error_; }

 private:
  int home_ = -1, saved_out_ = -1, saved_err_ = -1;
  std::string error_;
};

// What a served run (accel-run serve) starts from: the worker's options
// with the run's recipe and arguments (the state's accel.core reads them
// there), and a Lua state made once the run before it ended, accel
// already loaded in it (about half of a served run's start otherwise),
// never used by that run or any other: each run still gets a new state.
struct ServedStart {
  LaunchOptions options;
  lua_State* next = nullptr;
};

// The next served run's state: made, and accel loaded, while the worker
// waits for its command; none if loading fails (the run then makes its own
// and reports the error).
void prepare_served_state(ServedStart& start, CommunicatorOptions* comm_options, const std::string& lua_dir) {
  if (start.next) return;
  lua_State* L = new_worker_state(start.options, comm_options, lua_dir);
  lua_pushcfunction(L, traceback);
  if (!load_accel(L, lua_gettop(L))) {
    lua_close(L);
    return;
  }
  lua_settop(L, 0);
  start.next = L;
}

// Runs the recipe in a new Lua state, everything else reset; what the run
// left running in the background ends with it, as in a cold run. With a
// request (accel-run serve), its recipe and arguments, in its folder, to
// the streams that came with it.
WarmMessage run_once(const LaunchOptions& worker_options, CommunicatorOptions* comm_options,
                     const std::string& lua_dir, const std::string& request_text, std::vector<int>& fds,
                     ServedStart& served_start) {
  WarmMessage outcome{WarmMessage::Kind::ok, 0, ""};
  const LaunchOptions* run_options = &worker_options;
  std::optional<ServedRunScope> served;
  if (!request_text.empty()) {
    RunRequest request;
    try {
      request = decode_run_request(request_text);
      if (fds.size() != 2) throw std::runtime_error("a served run came without its two streams");
    } catch (const std::exception& error) {
      for (int fd : fds) ::close(fd);
      fds.clear();
      return WarmMessage{WarmMessage::Kind::failed, 0, std::string("accel-run: ") + error.what()};
    }
    served_start.options.recipe = request.recipe;
    served_start.options.recipe_args = request.args;
    run_options = &served_start.options;
    served.emplace(request, fds);
    fds.clear();
    if (!served->error().empty()) return WarmMessage{WarmMessage::Kind::failed, 0, served->error()};
  }
  const LaunchOptions& options = *run_options;
  reset_process(options);
  lua_State* L = served ? served_start.next : nullptr;
  served_start.next = nullptr;
  const bool accel_loaded = L != nullptr;
  if (L) {
    set_recipe_arguments(L, options);
  } else {
    L = new_worker_state(options, comm_options, lua_dir);
  }
  if (!run_recipe(L, options.recipe, accel_loaded)) {
    outcome.kind = WarmMessage::Kind::failed;
    const char* error = lua_tostring(L, -1);
    outcome.text = error ? error : "(error object is not a string)";
  }
  lua_close(L);
  end_kept_weights_run();
  tracking::close_open_trackers(outcome.kind == WarmMessage::Kind::ok ? tracking::RunOutcome::success
                                                                     : tracking::RunOutcome::failure);
  end_leftovers();
  return outcome;
}

}  // namespace

// A warm worker's life: the process group, once joined, serves every
// command (the communicator is kept between Lua states). A run gets a new
// Lua state and a reset process; chunks share the session's state.
void serve_warm_commands(const LaunchOptions& options, CommunicatorOptions* comm_options,
                                      const std::string& lua_dir, int control_fd) {
  ::fcntl(control_fd, F_SETFD, FD_CLOEXEC);  // not for what the recipe starts
  keep_communicator_between_states();
  keep_weights_between_states();
  send_to_launcher(control_fd, encode_warm_message({WarmMessage::Kind::ready, ::getpid(), ""}));
  WarmFrameReader reader;
  std::vector<int> fds;  // sent with the commands
  ServedStart served_start{options};
  while (std::optional<WarmCommand> command = next_command(control_fd, reader, fds)) {
    WarmMessage answer;
    const bool served = command->word == "run" && !command->text.empty();
    if (command->word == "run") {
      answer = run_once(options, comm_options, lua_dir, command->text, fds, served_start);
    } else if (command->word == "check") {
      answer = check_chunk(repl_state(options, comm_options, lua_dir), command->text);
    } else {
      answer = run_chunk(repl_state(options, comm_options, lua_dir), command->text);
    }
    std::fflush(nullptr);
    answer.number = answer.kind == WarmMessage::Kind::more ? 0 : kept_communicator_collectives();
    send_to_launcher(control_fd, encode_warm_message(answer));
    // A serve's workers run what is submitted next from a state made now.
    if (served) prepare_served_state(served_start, comm_options, lua_dir);
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace accel::lua
