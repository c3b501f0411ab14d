// A worker: one rank of a run. Embeds LuaJIT, opens the accel module and
// runs the recipe; a Lua error ends the worker with its message and
// traceback in the rank's error file, for the launcher's report. Under
// `accel-run --watch` it is a warm worker instead: it runs the recipe each
// time the launcher says so, every run in a new Lua state, and reports each
// run's outcome to the launcher without ending (engine/launch/warm_protocol.h).
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GeneratorImpl.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
}

#include "bindings/accel_core.h"
#include "bindings/error_log.h"
#include "bindings/lua_random.h"
#include "bindings/error_boundary.h"
#include "bindings/distributed_ops.h"
#include "engine/comm/communicator.h"
#include "engine/launch/launch_options.h"
#include "engine/launch/warm_protocol.h"
#include "engine/launch/worker_variables.h"
#include "engine/tracking/open_trackers.h"
#include "engine/caching_cpu_allocator.h"

namespace accel::lua {
namespace {

std::string lua_directory() {
  if (const char* dir = std::getenv("ACCEL_LUA_PATH")) return dir;
  return ACCEL_LUA_DIR;
}

// A worker started by accel-run finds the recipe and its arguments on its
// command line and every setting in variables (engine/launch/worker_variables.h).
// One started by mpirun or srun alone has only its command line and the
// config file; it sets the variables itself, for the Lua side to read.
LaunchOptions worker_options(const std::vector<std::string>& args) {
  const char* role = std::getenv("ACCEL_ROLE");
  bool launched = role && std::string(role) == "worker";
  LaunchOptions options = launched ? parse_launch_options(args) : resolve_launch_options(args);
  if (!launched) {
    // No launcher store to rendezvous on: MPI is the way the ranks meet.
    if (started_as_mpi_rank() && !std::getenv("MASTER_PORT")) options.backend = "mpi";
    for (const std::string& var : worker_variables(options)) {
      size_t equals = var.find('=');
      ::setenv(var.substr(0, equals).c_str(), var.c_str() + equals + 1, 0);
    }
  }
  read_worker_variables(options);
  return options;
}

int open_core(lua_State* L) {
  auto* options = static_cast<CommunicatorOptions*>(lua_touserdata(L, lua_upvalueindex(1)));
  return protect(L, "require 'accel.core'", [&] { return open_accel_core(L, *options); });
}

void set_package_path(lua_State* L, const std::string& dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  std::string path = dir + "/?.lua;" + dir + "/?/init.lua;" + lua_tostring(L, -1);
  lua_pop(L, 1);
  lua_pushstring(L, path.c_str());
  lua_setfield(L, -2, "path");
  lua_pop(L, 1);
}

void preload_core(lua_State* L, CommunicatorOptions* options) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushlightuserdata(L, options);
  lua_pushcclosure(L, open_core, 1);
  lua_setfield(L, -2, "accel.core");
  lua_pop(L, 2);
}

// os.exit([code]) ends the worker as the end of a recipe does: output
// flushed, then _Exit, without C's exit() running LibTorch's static
// destructors while the Lua state's communicator threads still run (and
// without a leak report under the sanitizers for the state left open).
// true and false mean success and failure, as in Lua.
int exit_worker(lua_State* L) {
  int code = EXIT_SUCCESS;
  if (lua_isboolean(L, 1)) {
    code = lua_toboolean(L, 1) ? EXIT_SUCCESS : EXIT_FAILURE;
  } else if (!lua_isnoneornil(L, 1)) {
    code = static_cast<int>(luaL_checkinteger(L, 1));
  }
  tracking::close_open_trackers(code == EXIT_SUCCESS ? tracking::RunOutcome::success
                                                     : tracking::RunOutcome::failure);
  std::fflush(nullptr);
  std::_Exit(code);
}

void install_os_exit(lua_State* L) {
  lua_getglobal(L, "os");
  lua_pushcfunction(L, exit_worker);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}

// arg[0] is the recipe, arg[1..] its own arguments, as the lua command does.
void set_arg_table(lua_State* L, const LaunchOptions& options) {
  lua_createtable(L, static_cast<int>(options.recipe_args.size()), 1);
  lua_pushstring(L, options.recipe.c_str());
  lua_rawseti(L, -2, 0);
  for (size_t i = 0; i < options.recipe_args.size(); ++i) {
    lua_pushstring(L, options.recipe_args[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setglobal(L, "arg");
}

int traceback(lua_State* L) {
  if (!lua_isstring(L, 1)) {  // error(non-string): describe it rather than lose it
    lua_getglobal(L, "tostring");
    lua_pushvalue(L, 1);
    lua_call(L, 1, 1);
    lua_replace(L, 1);
  }
  lua_getglobal(L, "debug");
  lua_getfield(L, -1, "traceback");
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 2);
  lua_call(L, 2, 1);
  return 1;
}

// Strict globals, as Lua's strict.lua: a typo such as `modle` for `model`
// fails where it is made instead of reading nil. Reading a global nobody
// assigned is an error, and so is creating a global inside a function;
// assignments at the top level of a chunk (or from C) declare the name.
// Upvalue 1 of both metamethods is the table of declared names.
// What kind of function touched the global: "main" (a chunk's top level),
// "Lua" (inside a function) or "C".
const char* caller_kind(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 1, &ar)) return "C";
  lua_getinfo(L, "S", &ar);
  return ar.what;
}

const char* global_name(lua_State* L) {
  return lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : luaL_typename(L, 2);
}

bool is_declared(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  bool declared = !lua_isnil(L, -1);
  lua_pop(L, 1);
  return declared;
}

int strict_index(lua_State* L) {
  if (!is_declared(L) && std::strcmp(caller_kind(L), "C") != 0) {
    return luaL_error(L, "undefined global '%s'", global_name(L));
  }
  lua_pushnil(L);
  return 1;
}

int strict_newindex(lua_State* L) {
  if (!is_declared(L)) {
    const char* kind = caller_kind(L);
    if (std::strcmp(kind, "main") != 0 && std::strcmp(kind, "C") != 0) {
      return luaL_error(L,
                        "assignment to undeclared global '%s' inside a function (make it local, "
                        "or assign it once at the top level of the recipe)",
                        global_name(L));
    }
    lua_pushvalue(L, 2);
    lua_pushboolean(L, 1);
    lua_rawset(L, lua_upvalueindex(1));
  }
  lua_rawset(L, 1);
  return 0;
}

void make_globals_strict(lua_State* L) {
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_newtable(L);  // the metatable
  lua_newtable(L);  // declared names, shared by both metamethods
  lua_pushvalue(L, -1);
  lua_pushcclosure(L, strict_index, 1);
  lua_setfield(L, -3, "__index");
  lua_pushcclosure(L, strict_newindex, 1);
  lua_setfield(L, -2, "__newindex");
  lua_setmetatable(L, -2);
  lua_pop(L, 1);
}

// Loads accel (as the global `accel` too) and runs the recipe. On failure
// the error with its traceback is on the stack.
bool run_recipe(lua_State* L, const std::string& recipe) {
  lua_pushcfunction(L, traceback);
  int handler = lua_gettop(L);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "accel");
  if (lua_pcall(L, 1, 1, handler) != 0) return false;
  lua_setglobal(L, "accel");
  make_globals_strict(L);
  if (luaL_loadfile(L, recipe.c_str()) != 0) return false;  // message names file and line
  if (lua_pcall(L, 0, 0, handler) != 0) return false;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "accel.core");
  if (lua_pcall(L, 1, 1, handler) != 0) return false;
  lua_getfield(L, -1, "dist");
  lua_getfield(L, -1, "finish");
  return lua_pcall(L, 0, 0, handler) == 0;
}

// A Lua state ready for the recipe: libraries, accel.core preloaded, arg.
lua_State* new_worker_state(const LaunchOptions& options, CommunicatorOptions* comm_options,
                            const std::string& lua_dir) {
  lua_State* L = luaL_newstate();
  luaL_openlibs(L);
  install_math_random(L);  // a generator checkpoints can save
  install_os_exit(L);
  set_package_path(L, lua_dir);
  preload_core(L, comm_options);
  set_arg_table(L, options);
  return L;
}

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

// The launcher's next command; nothing when it has gone.
std::optional<WarmCommand> next_command(int fd, WarmFrameReader& reader) {
  for (;;) {
    if (std::optional<WarmCommand> command = reader.next_command()) return command;
    char buffer[4096];
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
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
  lua_getglobal(L, "require");
  lua_pushliteral(L, "accel");
  if (lua_pcall(L, 1, 1, 0) != 0) exit_with_error(lua_tostring(L, -1));
  lua_setglobal(L, "accel");
  make_globals_strict(L);
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

// Runs the recipe in a new Lua state, everything else reset.
WarmMessage run_once(const LaunchOptions& options, CommunicatorOptions* comm_options,
                     const std::string& lua_dir) {
  reset_process(options);
  lua_State* L = new_worker_state(options, comm_options, lua_dir);
  WarmMessage outcome{WarmMessage::Kind::ok, 0, ""};
  if (!run_recipe(L, options.recipe)) {
    outcome.kind = WarmMessage::Kind::failed;
    const char* error = lua_tostring(L, -1);
    outcome.text = error ? error : "(error object is not a string)";
  }
  lua_close(L);
  tracking::close_open_trackers(outcome.kind == WarmMessage::Kind::ok ? tracking::RunOutcome::success
                                                                     : tracking::RunOutcome::failure);
  return outcome;
}

// A warm worker's life: the process group, once joined, serves every
// command (the communicator is kept between Lua states). A run gets a new
// Lua state and a reset process; chunks share the session's state.
[[noreturn]] void serve_warm_commands(const LaunchOptions& options, CommunicatorOptions* comm_options,
                                      const std::string& lua_dir, int control_fd) {
  ::fcntl(control_fd, F_SETFD, FD_CLOEXEC);  // not for what the recipe starts
  keep_communicator_between_states();
  send_to_launcher(control_fd, encode_warm_message({WarmMessage::Kind::ready, ::getpid(), ""}));
  WarmFrameReader reader;
  while (std::optional<WarmCommand> command = next_command(control_fd, reader)) {
    WarmMessage answer;
    if (command->word == "run") {
      answer = run_once(options, comm_options, lua_dir);
    } else if (command->word == "check") {
      answer = check_chunk(repl_state(options, comm_options, lua_dir), command->text);
    } else {
      answer = run_chunk(repl_state(options, comm_options, lua_dir), command->text);
    }
    std::fflush(nullptr);
    answer.number = answer.kind == WarmMessage::Kind::more ? 0 : kept_communicator_collectives();
    send_to_launcher(control_fd, encode_warm_message(answer));
  }
  std::fflush(nullptr);
  std::_Exit(0);
}

}  // namespace
}  // namespace accel::lua

extern "C" int accel_worker_main(int argc, char** argv) {
  using namespace accel;
  // Lua's collector frees dead tensors in batches, and glibc's fast bins
  // then cost a consolidation pass over them on the next larger request:
  // without fast bins, small tensor ops from Lua run ~40% faster
  // (bench/op_overhead).
  ::mallopt(M_MXFAST, 0);
  // ACCEL_CPU_ALLOCATOR=system leaves LibTorch's own CPU allocator, over
  // whatever malloc the process has (bench/python/allocators.py compares
  // the engine's with glibc, jemalloc and tcmalloc so).
  const char* allocator = std::getenv("ACCEL_CPU_ALLOCATOR");
  const std::string allocator_name = allocator ? allocator : "caching";
  if (allocator_name == "caching") {
    install_caching_cpu_allocator();
  } else if (allocator_name != "system") {
    lua::report_fatal("accel-run: ACCEL_CPU_ALLOCATOR is '" + allocator_name + "'; expected 'caching' or 'system'");
    return 2;
  }
  // Lines reach the launcher as they are printed, and none is lost when
  // the worker is stopped.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  LaunchOptions options;
  try {
    options = lua::worker_options(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const LaunchOptionsError& e) {
    lua::report_fatal(std::string("accel-run: ") + e.what());
    return 2;
  }
  at::set_num_threads(options.threads);

  CommunicatorOptions comm_options;
  comm_options.backend = options.backend;
  comm_options.backend_given = options.origins.count("--backend") > 0;
  comm_options.timeout = std::chrono::milliseconds(std::llround(options.timeout_s * 1000));
  comm_options.debug = options.debug;

  std::string lua_dir = lua::lua_directory();
  lua::set_library_source_prefix(lua_dir);
  if (const char* control = std::getenv(kControlFdVariable)) {
    lua::serve_warm_commands(options, &comm_options, lua_dir, std::atoi(control));
  }
  lua_State* L = lua::new_worker_state(options, &comm_options, lua_dir);
  if (!lua::run_recipe(L, options.recipe)) lua::exit_with_error(lua_tostring(L, -1));
  lua_close(L);  // frees tensors and ends the communicator (MPI_Finalize included)
  std::fflush(nullptr);
  // LibTorch's static destructors deregister every kernel one by one (about
  // 0.1 s); a finished worker has nothing left for them to do.
  std::_Exit(0);
}
