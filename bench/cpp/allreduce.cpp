// Gradient synchronisation throughput: the engine's bucketed path
// (accel::GradientReducer over the Gloo communicator, as Accelerator:backward
// uses it) against a raw c10d ProcessGroupGloo all-reduce of the same bytes,
// on a few sizes. Run on 2 ranks or more:
//   bench_launch --nproc 2 build-bench/bench/bench_allreduce [repeats]
// Rank 0 prints one ALLREDUCE line per size for bench/python/harness.py.
//
// The engine's figure is the time a synchronising backward adds: backward
// with the reducer on, plus finalize, minus the same backward with it off.
// The gradients come from a trivial graph (the sum of each parameter), so
// backward itself costs little more than writing the gradients.
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <cstdio>

#include "bench/cpp/bench_common.h"
#include "engine/comm/c10d_store.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

constexpr int kParams = 8;  // the bytes are split over this many parameters

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  const int repeats = argc > 1 ? std::max(3, std::atoi(argv[1])) : 20;
  bench::World world = bench::join_world();
  if (world.size() < 2) {
    std::fprintf(stderr, "bench_allreduce: run on 2 ranks or more\n");
    return 2;
  }

  auto store = c10::make_intrusive<accel::C10dStore>(world.state.store_address(), std::chrono::minutes(5));
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  c10d::ProcessGroupGloo raw(c10::make_intrusive<c10d::PrefixStore>("raw", store), world.rank(),
                             world.size(), options);

  for (int64_t bytes : {64LL << 10, 1LL << 20, 4LL << 20, 16LL << 20, 64LL << 20}) {
    const int64_t numel = bytes / 4;
    std::vector<double> raw_s, on_s, off_s;

    std::vector<at::Tensor> flat{torch::ones({numel})};
    for (int i = 0; i < repeats + 3; ++i) {
      double t = bench::now();
      raw.allreduce(flat)->wait();
      if (i >= 3) raw_s.push_back(bench::now() - t);
    }

    std::vector<at::Tensor> params;
    for (int i = 0; i < kParams; ++i) params.push_back(torch::ones({numel / kParams}).requires_grad_());
    accel::GradientReducer reducer(*world.comm, params);
    for (int i = 0; i < 2 * (repeats + 3); ++i) {
      const bool sync = i % 2 == 0;  // interleaved, so both see the same machine
      for (at::Tensor& p : params) p.mutable_grad().reset();
      reducer.set_sync(sync);
      reducer.caller_finishes_backward();
      world.comm->barrier();
      double t = bench::now();
      at::Tensor loss = params[0].sum();
      for (int j = 1; j < kParams; ++j) loss = loss + params[j].sum();
      loss.backward();
      reducer.end_backward();
      if (sync) reducer.finalize(world.size());
      double elapsed = bench::now() - t;
      if (i >= 6) (sync ? on_s : off_s).push_back(elapsed);
    }

    if (world.rank() == 0) {
      std::printf("ALLREDUCE {\"bytes\": %lld, \"params\": %d, \"buckets\": %lld, \"raw_s\": %.9f, "
                  "\"engine_s\": %.9f, \"backward_s\": %.9f}\n",
                  static_cast<long long>(bytes), kParams, static_cast<long long>(reducer.num_buckets()),
                  median(raw_s), median(on_s) - median(off_s), median(off_s));
      std::fflush(stdout);
    }
  }
}
