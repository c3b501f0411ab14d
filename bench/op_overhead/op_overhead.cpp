// bench/op_overhead: the cost of calling a small tensor op from Lua, against
// the same call made directly on ATen. Times `calls` calls of a few ops on
// 16-element float tensors in C++ (one intra-op thread), runs the Lua half
// (op_overhead.lua) under accel-run with one thread too, and prints both
// and their ratio. The two halves take turns for --rounds rounds and each
// keeps its fastest: on a shared virtual machine one run can be 2x slower
// than the next, and the fastest is the one least disturbed. Exits 1 when
// a ratio exceeds --max-ratio (default 1.5). --cpp-only times the C++ half
// alone (bench/instructions.py counts its instructions).
//   op_overhead [--calls N] [--rounds K] [--max-ratio R] [--accel-run PATH] [--cpp-only]
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

// A template rather than std::function, so the C++ side pays no indirect call.
template <class Call>
double nanoseconds_per_call(Call call, long calls) {
  at::Tensor sink;
  for (long i = 0; i < calls / 10 + 1; ++i) sink = call();  // warm up, as the Lua half does
  auto start = std::chrono::steady_clock::now();
  for (long i = 0; i < calls; ++i) sink = call();
  std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(calls);
}

// Runs the Lua half and reads its "lua <name>\t<ns>" lines.
std::map<std::string, double> lua_figures(const std::string& accel_run, long calls) {
  std::string command = "ACCEL_THREADS=1 '" + accel_run + "' '" OP_OVERHEAD_SCRIPT "' -- " +
                        std::to_string(calls);
  std::map<std::string, double> figures;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return figures;
  char line[256];
  while (std::fgets(line, sizeof line, pipe)) {
    std::string text(line);
    auto tab = text.find('\t');
    if (text.rfind("lua ", 0) != 0 || tab == std::string::npos) continue;
    figures[text.substr(4, tab - 4)] = std::atof(text.c_str() + tab + 1);
  }
  if (pclose(pipe) != 0) figures.clear();
  return figures;
}

}  // namespace

int main(int argc, char** argv) {
  long calls = 1000000;
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
  std::vector<double> cpp(ops.size(), 1e300);
  std::map<std::string, double> lua;
  for (int round = 0; round < rounds; ++round) {
    const std::vector<double> times = {
        nanoseconds_per_call([&] { return a + b; }, calls),
        nanoseconds_per_call([&] { return a.mul(b); }, calls),
        nanoseconds_per_call([&] { return a.sum(); }, calls),
    };
    for (size_t i = 0; i < ops.size(); ++i) cpp[i] = std::min(cpp[i], times[i]);
    if (cpp_only) continue;
    std::map<std::string, double> lua_round = lua_figures(accel_run, calls);
    if (lua_round.size() != ops.size()) {
      std::fprintf(stderr, "op_overhead: the Lua half (%s) did not report every op\n",
                   OP_OVERHEAD_SCRIPT);
      return 1;
    }
    for (const auto& [op, ns] : lua_round) lua[op] = lua.count(op) ? std::min(lua[op], ns) : ns;
  }
  if (cpp_only) {
    for (size_t i = 0; i < ops.size(); ++i) std::printf("cpp %s\t%.1f\n", ops[i].c_str(), cpp[i]);
    return 0;
  }
  std::printf("%ld calls each, 16-element float32 tensors, 1 thread; fastest of %d rounds\n",
              calls, rounds);
  std::printf("%-10s %12s %12s %7s\n", "op", "C++ ns/call", "Lua ns/call", "ratio");
  bool within = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    double ratio = lua[ops[i]] / cpp[i];
    within = within && ratio <= max_ratio;
    std::printf("%-10s %12.1f %12.1f %7.2f\n", ops[i].c_str(), cpp[i], lua[ops[i]], ratio);
  }
  std::printf("%s: every ratio %s %.2f\n", within ? "ok" : "FAILED", within ? "<=" : "must be <=",
              max_ratio);
  return within ? 0 : 1;
}
