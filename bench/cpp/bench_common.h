// What the C++ versions of the workloads share with their Lua and Python
// twins (bench/workloads/bench.lua, bench/python/common.py): the command
// line (warm-up steps, steps per window, windows), the timed loop over
// sharded epochs, and the BENCH report line bench/python/harness.py reads.
// The loop is the one a hand-written LibTorch program would have; the
// engine supplies only what the Lua recipe also gets from it: the shard
// order (accel::data::EpochPlan, PyTorch's DistributedSampler order), the
// communicator, the gradient reducer and AdamW.
#pragma once
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "engine/comm/communicator.h"
#include "engine/data/epoch_plan.h"
#include "engine/parallel/gradient_reducer.h"
#include "engine/optim/adam.h"
#include "engine/process_state.h"

namespace bench {

struct LoopConfig {
  int warmup = 20;
  int window = 50;
  int windows = 5;
};

// argv: [warmup window windows], as the Lua and Python versions take them.
inline LoopConfig parse_loop_config(int argc, char** argv) {
  LoopConfig c;
  if (argc > 1) c.warmup = std::max(1, std::atoi(argv[1]));
  if (argc > 2) c.window = std::max(1, std::atoi(argv[2]));
  if (argc > 3) c.windows = std::max(1, std::atoi(argv[3]));
  return c;
}

// Seconds on CLOCK_MONOTONIC, the clock the harness starts its timer on.
inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline long status_kib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) == 0) return std::atol(line.c_str() + prefix.size());
  }
  return -1;
}

// The BLAS library this process mapped (what libblas.so.3 resolved to).
inline std::string loaded_blas() {
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    auto path = line.find('/');
    // The file name, not the folder: liblapack sits in OpenBLAS's folder too.
    if (path != std::string::npos && line.find("blas", line.rfind('/')) != std::string::npos) {
      return line.substr(path);
    }
  }
  return "none";
}

// One rank's process: the communicator and the world it sees.
struct World {
  accel::ProcessState state;
  std::unique_ptr<accel::Communicator> comm;
  int rank() const { return state.rank; }
  int size() const { return state.world_size; }
};

inline World join_world() {
  World w;
  w.state = accel::ProcessState::from_environment();
  w.comm = accel::make_communicator(w.state, accel::CommunicatorOptions{});
  return w;
}

// Rank 0's parameters everywhere, as Accelerator:prepare (and DDP) do.
inline void broadcast_parameters(World& w, const std::vector<at::Tensor>& params) {
  if (w.size() == 1) return;
  at::NoGradGuard no_grad;
  for (at::Tensor p : params) w.comm->broadcast(p, 0);
}

// Trains until warmup + window * windows steps have run, epoch after
// epoch, and prints the BENCH line. `step(x, y)` runs one training step and
// returns the loss.
template <class Step>
void train(World& w, const LoopConfig& c, const at::Tensor& x, const at::Tensor& y, int64_t batch,
           Step step) {
  accel::data::ShardLayout layout;
  layout.dataset_size = x.size(0);
  layout.world_size = w.size();
  layout.rank = w.rank();
  layout.batch_size = batch;
  layout.shuffle = true;
  layout.seed = 0;
  const int total = c.warmup + c.window * c.windows;
  int steps = 0;
  double first_step = 0, window_start = 0, loss_sum = 0;
  int64_t window_samples = 0;
  std::vector<double> windows;
  for (int64_t epoch = 0; steps < total; ++epoch) {
    accel::data::EpochPlan plan(layout, epoch);
    at::Tensor order = plan.indices();
    const int64_t n = order.numel(), batches = plan.num_batches();
    for (int64_t k = 0; k < batches && steps < total; ++k) {
      at::Tensor rows = order.narrow(0, k * batch, std::min(batch, n - k * batch));
      at::Tensor xb = x.index_select(0, rows), yb = y.index_select(0, rows);
      double loss = step(xb, yb);
      ++steps;
      if (steps == 1) first_step = now();
      if (steps == c.warmup) {
        window_start = now();
      } else if (steps > c.warmup) {
        window_samples += xb.size(0);
        if ((steps - c.warmup) % c.window == 0) {
          double t = now();
          windows.push_back(static_cast<double>(window_samples * w.size()) / (t - window_start));
          window_start = t;
          window_samples = 0;
        }
      }
      if (steps > total - c.window) loss_sum += loss;
    }
  }
  std::ostringstream out;
  out.precision(10);
  out << "BENCH {\"rank\": " << w.rank() << ", \"world\": " << w.size()
      << ", \"first_step\": " << first_step << ", \"windows\": [";
  for (size_t i = 0; i < windows.size(); ++i) out << (i ? ", " : "") << windows[i];
  out << "], \"loss\": " << loss_sum / c.window << ", \"vmhwm_kib\": " << status_kib("VmHWM")
      << ", \"blas\": \"" << loaded_blas() << "\"}\n";
  std::string line = out.str();
  std::fwrite(line.data(), 1, line.size(), stdout);  // one write: ranks share the pipe
  std::fflush(stdout);
}

// Backward with the engine's gradient all-reduce (the Accelerator's
// backward), the AdamW step and zero_grad: the tail of every step.
struct Trainer {
  World& world;
  std::vector<at::Tensor> params;
  accel::optim::AdamW optimizer;
  std::unique_ptr<accel::GradientReducer> reducer;

  Trainer(World& w, std::vector<at::Tensor> p)
      : world(w), params(std::move(p)), optimizer(params, {{"lr", 1e-3}}) {
    broadcast_parameters(world, params);
    if (world.size() > 1) reducer = std::make_unique<accel::GradientReducer>(*world.comm, params);
  }

  double finish(const at::Tensor& loss) {
    if (reducer) reducer->caller_finishes_backward();
    loss.backward();
    if (reducer) {
      reducer->end_backward();
      reducer->finalize(world.size());
    }
    optimizer.step();
    optimizer.zero_grad();
    return loss.item<double>();
  }
};

}  // namespace bench
