// Process-level switches: seeding, threads (and the CPUs to run them on),
// the tensor accounting that tests read to prove memory is released (and
// whether a Lua value is a tensor handle at all), and the facts about
// stdout that accel.progress needs.
#include <ATen/Parallel.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "bindings/op_tables.h"
#include "bindings/option_table.h"
#include "bindings/tensor_handle.h"
#include "engine/caching_cpu_allocator.h"

namespace accel::lua {

std::vector<Binding> runtime_bindings() {
  return {
      bind("manual_seed", [](int64_t seed) { at::manual_seed(static_cast<uint64_t>(seed)); }),
      bind("set_num_threads", [](int64_t n) {
        TORCH_CHECK(n >= 1, "set_num_threads: need at least 1 thread, got ", n);
        at::set_num_threads(static_cast<int>(n));
      }),
      bind("get_num_threads", []() { return static_cast<int64_t>(at::get_num_threads()); }),
      // The CPUs this process may run on (its affinity mask, which a
      // launcher or a container may have narrowed), as os.sched_getaffinity.
      bind("available_cpus", []() {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (::sched_getaffinity(0, sizeof(set), &set) != 0) return static_cast<int64_t>(std::thread::hardware_concurrency());
        return static_cast<int64_t>(CPU_COUNT(&set));
      }),
      bind("is_grad_enabled", []() { return at::GradMode::is_enabled(); }),
      // Seconds on a monotonic clock, for timing (os.clock is CPU time).
      bind("time", []() {
        return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
      }),
      bind("live_tensors", []() { return tensor_stats().live_handles; }),
      bind("tensor_bytes", []() { return tensor_stats().live_bytes; }),
      bind("tensor_collections", []() { return tensor_stats().collections; }),
      bind("release_tensor", [](lua_State* L) { release_tensor(L, 1); }),
      // torch.is_tensor: whether the value is one of the engine's tensor
      // handles (its tag, not its fields: a table with a dtype is not one).
      bind("is_tensor", [](lua_State* L) {
        lua_pushboolean(L, to_tensor(L, 1) != nullptr);
        return Pushed{1};
      }),
      // accel.init_empty_weights makes tensors on "meta" while it builds;
      // nil goes back to the default.
      bind("set_creation_device", [](c10::optional<std::string> name) {
        set_creation_device(name ? c10::optional<at::Device>(usable_device(*name, "creation device"))
                                 : c10::nullopt);
      }),
      bind("creation_device", []() {
        auto device = creation_device();
        return device ? device->str() : std::string("cpu");
      }),
      bind("release_pooled_blocks", []() { release_pooled_blocks(); }),
      // cpu_memory_stats() -> {allocated_bytes, peak_allocated_bytes,
      // pooled_bytes}: the CPU allocator's blocks over 1 KiB
      // (engine/caching_cpu_allocator.h), as torch.cuda.memory_stats for a GPU.
      bind("cpu_memory_stats", [](lua_State* L) {
        const CpuMemoryStats stats = cpu_memory_stats();
        lua_createtable(L, 0, 3);
        set_number_fields(L, {{"allocated_bytes", static_cast<double>(stats.allocated)},
                              {"peak_allocated_bytes", static_cast<double>(stats.peak_allocated)},
                              {"pooled_bytes", static_cast<double>(stats.pooled)}});
        return Pushed{1};
      }),
      bind("reset_peak_cpu_memory_stats", []() { reset_peak_cpu_memory(); }),
      // Whether stdout is a terminal that can redraw a line (not TERM=dumb).
      // Rank 0 writes to accel-run's own stdout (a terminal when the user
      // watches); other ranks, and rank 0 under --log-dir, write to a pipe.
      bind("stdout_is_terminal", []() {
        const char* term = std::getenv("TERM");
        return ::isatty(STDOUT_FILENO) == 1 && !(term && std::string(term) == "dumb");
      }),
      // The terminal's width in columns, 0 when stdout is no terminal.
      bind("terminal_columns", []() -> int64_t {
        winsize size{};
        return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 ? size.ws_col : 0;
      }),
  };
}

}  // namespace accel::lua
