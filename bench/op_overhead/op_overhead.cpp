// bench/op_overhead: the cost of calling a small tensor op from Lua, against
// the same call made directly on ATen. Times `calls` calls of a few ops on
// 16-element float tensors in C++ (one intra-op thread), runs the Lua half
// (op_overhead.lua) under accel-run with one thread too, and prints both
// and their ratio. Each half times its calls in --windows equal windows;
// the halves take turns for --rounds rounds, and each keeps its fastest
// window and the median of its windows. On a shared virtual machine one
// second can run 2x slower than the next: the fastest window is the one
// least disturbed, and short windows find undisturbed stretches that whole
// runs of a million calls rarely get. Exits 1 when a ratio of fastest
// windows exceeds --max-ratio (default 1.5). --cpp-only times the C++ half
// alone (bench/instructions.py counts its instructions).
//   op_overhead [--calls N] [--windows W] [--rounds K] [--max-ratio R] [--accel-run PATH] [--cpp-only]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

// Nanoseconds per call: of the fastest window, and the median window.
struct Timing {
  double fastest = 0;
  double median = 0;
};

// A template rather than std::function, so the C++ side pays no indirect call.
template <class Call>
Timing time_windows(Call call, long calls, int windows) {
  at::Tensor sink;
  for (long i = 0; i < calls / 10 + 1; ++i) sink = call();  // warm up, as the Lua half does
  const long per_window = std::max(1L, calls / windows);
  std::vector<double> per_call;
  for (int window = 0; window < windows; ++window) {
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < per_window; ++i) sink = call();
    std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
    per_call.push_back(elapsed.count() / static_cast<double>(per_window));
  }
  std::sort(per_call.begin(), per_call.end());
  return {per_call.front(), per_call[(per_call.size() - 1) / 2]};
}

// Runs the Lua half and reads its "lua <name>\t<fastest>\t<median>" lines.
std::map<std::string, Timing> lua_figures(const std::string& accel_run, long calls, int windows) {
  std::string command = "ACCEL_THREADS=1 '" + accel_run + "' '" OP_OVERHEAD_SCRIPT "' -- " +
                        std::to_string(calls) + " " + std::to_string(windows);
  std::map<std::string, Timing> figures;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return figures;
  char line[256];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text(line);
    auto tab = text.find('\t');
    if (text.rfind("lua ", 0) != 0 || tab == std::string::npos) continue;
    char* rest = nullptr;
    Timing timing;
    timing.fastest = std::strtod(text.c_str() + tab + 1, &rest);
    timing.median = std::strtod(rest, nullptr);
    figures[text.substr(4, tab - 4)] = timing;
  }
  if (pclose(pipe) != 0) figures.clear();
  return figures;
}

// Keeps the fastest window of all rounds, and the median of the rounds' medians.
struct Rounds {
  double fastest = 1e300;
  std::vector<double> medians;
  void add(const Timing& t) {
    fastest = std::min(fastest, t.fastest);
    medians.push_back(t.median);
  }
  double median() {
    std::sort(medians.begin(), medians.end());
    return medians[(medians.size() - 1) / 2];
  }
};

}  // namespace

int main(int argc, char** argv) {
  long calls = 1000000;
  int windows = 10;
  int rounds = 5;
  double max_ratio = 1.5;
  std::string accel_run = ACCEL_RUN_PATH;
  bool cpp_only = false;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--cpp-only") {
      cpp_only = true;
      --i;  // takes no value
    } else if (i + 1 == argc) {
      std::fprintf(stderr, "op_overhead: option '%s' needs a value\n", argv[i]);
      return 2;
    } else if (flag == "--calls") {
      calls = std::atol(argv[i + 1]);
    } else if (flag == "--windows") {
      windows = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--rounds") {
      rounds = std::max(1, std::atoi(argv[i + 1]));
    } else if (flag == "--max-ratio") {
      max_ratio = std::atof(argv[i + 1]);
    } else if (flag == "--accel-run") {
      accel_run = argv[i + 1];
    } else {
      std::fprintf(stderr, "op_overhead: unknown option '%s'\n", argv[i]);
      return 2;
    }
  }

  at::set_num_threads(1);
  at::Tensor a = at::randn({16}), b = at::randn({16});
  const std::vector<std::string> ops = {"a + b", "a:mul(b)", "a:sum()"};
  std::vector<Rounds> cpp(ops.size()), lua(ops.size());
  for (int round = 0; round < rounds; ++round) {
    cpp[0].add(time_windows([&] { return a + b; }, calls, windows));
    cpp[1].add(time_windows([&] { return a.mul(b); }, calls, windows));
    cpp[2].add(time_windows([&] { return a.sum(); }, calls, windows));
    if (cpp_only) continue;
    std::map<std::string, Timing> lua_round = lua_figures(accel_run, calls, windows);
    for (size_t i = 0; i < ops.size(); ++i) {
      if (!lua_round.count(ops[i])) {
        std::fprintf(stderr, "op_overhead: the Lua half (%s) did not report '%s'\n",
                     OP_OVERHEAD_SCRIPT, ops[i].c_str());
        return 1;
      }
      lua[i].add(lua_round[ops[i]]);
    }
  }
  if (cpp_only) {
    for (size_t i = 0; i < ops.size(); ++i) std::printf("cpp %s\t%.1f\n", ops[i].c_str(), cpp[i].fastest);
    return 0;
  }
  std::printf("%ld calls each in %d windows, 16-element float32 tensors, 1 thread, %d rounds\n",
              calls, windows, rounds);
  std::printf("%-10s %21s %21s %15s\n", "", "C++ ns/call", "Lua ns/call", "Lua/C++");
  std::printf("%-10s %10s %10s %10s %10s %7s %7s\n", "op", "fastest", "median", "fastest", "median",
              "fastest", "median");
  bool within = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    double ratio = lua[i].fastest / cpp[i].fastest;
    within = within && ratio <= max_ratio;
    double cpp_median = cpp[i].median(), lua_median = lua[i].median();
    std::printf("%-10s %10.1f %10.1f %10.1f %10.1f %7.2f %7.2f\n", ops[i].c_str(), cpp[i].fastest,
                cpp_median, lua[i].fastest, lua_median, ratio, lua_median / cpp_median);
  }
  std::printf("%s: every ratio of fastest windows %s %.2f\n", within ? "ok" : "FAILED",
              within ? "<=" : "must be <=", max_ratio);
  return within ? 0 : 1;
}
