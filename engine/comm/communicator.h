// The collectives a training run needs, independent of the transport.
// One implementation per backend file (gloo_communicator.cpp, ...); the rest
// of the engine only sees this interface.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/reduce_op.h"

namespace at {
class Tensor;
}

namespace accel {

struct ProcessState;

// A collective that could not complete: a peer closed its connection (it
// died or failed), or the operation timed out. Usually the consequence of
// another rank's failure, so launchers report it as such.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A collective that did not complete within CommunicatorOptions::timeout;
// the message names the operation, the recipe line that called it and the
// ranks that did not arrive. Not a CollectiveError: the rank that times out
// reports the problem rather than suffering another rank's failure.
class CollectiveTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Ranks called different collectives, or the same one with different
// shapes or dtypes (found under CommunicatorOptions::debug); the message
// names the ranks and what each passed.
class CollectiveMismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation started asynchronously; wait() blocks until it completes.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
};

// An operation that was complete before the call that started it returned.
class CompletedOp final : public PendingOp {
 public:
  void wait() override {}
};

// How many collectives ran, by kind: tests use it to prove that a step did
// (or did not) communicate. The bytes are the tensors' as the caller gave
// them: a rank's whole gathered output (its own slice included), a
// reduce-scatter's whole input (what sharding's mixed precision halves).
struct CollectiveCounts {
  int64_t all_reduce = 0;
  int64_t all_reduce_shared_memory = 0;  // of all_reduce, those through shared memory
  int64_t broadcast = 0;
  int64_t all_gather = 0;  // all_gather and all_gather_into
  int64_t barrier = 0;
  int64_t reduce_scatter = 0;
  int64_t all_gather_bytes = 0;
  int64_t reduce_scatter_bytes = 0;
};

// Field by field, for communicators that wrap others: they add what they
// carry themselves and take away what they sent only for their own sake.
inline CollectiveCounts operator+(CollectiveCounts a, const CollectiveCounts& b) {
  a.all_reduce += b.all_reduce;
  a.all_reduce_shared_memory += b.all_reduce_shared_memory;
  a.broadcast += b.broadcast;
  a.all_gather += b.all_gather;
  a.barrier += b.barrier;
  a.reduce_scatter += b.reduce_scatter;
  a.all_gather_bytes += b.all_gather_bytes;
  a.reduce_scatter_bytes += b.reduce_scatter_bytes;
  return a;
}
inline CollectiveCounts operator-(const CollectiveCounts& a, const CollectiveCounts& b) {
  return a + CollectiveCounts{-b.all_reduce, -b.all_reduce_shared_memory, -b.broadcast,
                              -b.all_gather, -b.barrier, -b.reduce_scatter,
                              -b.all_gather_bytes, -b.reduce_scatter_bytes};
}

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;

  // In place on `t` (dense, contiguous), the same shape on every rank.
  virtual void all_reduce(at::Tensor& t, ReduceOp op) = 0;
  virtual std::unique_ptr<PendingOp> all_reduce_async(at::Tensor& t, ReduceOp op) = 0;
  virtual void broadcast(at::Tensor& t, int root) = 0;
  // Every rank's `t` (same shape on every rank), in rank order.
  virtual std::vector<at::Tensor> all_gather(const at::Tensor& t) = 0;
  // Reduce-scatter into a flat shard: `input` is 1-D, contiguous, with
  // size() * output.numel() elements; rank r receives in `output` (1-D,
  // contiguous, same dtype) the reduction over ranks of
  // input[r*n, (r+1)*n), n = output.numel(). `input` serves as scratch: its
  // contents afterwards are unspecified.
  virtual void reduce_scatter(at::Tensor& output, at::Tensor& input, ReduceOp op) = 0;
  // All-gather into a flat buffer: `output` is 1-D, contiguous, with
  // size() * input.numel() elements; rank r's `input` lands at
  // output[r*n, (r+1)*n). `input` may be that very slice of `output` (in place).
  virtual void all_gather_into(at::Tensor& output, const at::Tensor& input) = 0;
  // Started asynchronously where the backend can (Gloo, NCCL); elsewhere it
  // completes before returning. Neither tensor may be touched before wait().
  virtual std::unique_ptr<PendingOp> all_gather_into_async(at::Tensor& output, const at::Tensor& input) {
    all_gather_into(output, input);
    return std::make_unique<CompletedOp>();
  }
  virtual void barrier() = 0;
  // Waits, after the recipe, until every rank has finished its own: no rank
  // may exit while a peer still needs it. A barrier unless the communicator
  // knows a way that cannot pair with a peer's unfinished collective
  // (MonitoredCommunicator: through the launcher's store).
  virtual void finish() { barrier(); }

  // The collectives the caller asked for. A backend counts them in counts_;
  // a communicator that wraps others answers from theirs.
  virtual CollectiveCounts counts() const { return counts_; }

 protected:
  CollectiveCounts counts_;
};

struct CommunicatorOptions {
  std::string backend = "gloo";
  // Whether the launch named the backend (--backend, or the config file's
  // key). When it did not, a rank on a GPU takes nccl if every local rank
  // has a GPU of its own (NCCL refuses two ranks on one GPU), else gloo.
  bool backend_given = false;
  // The GPU this rank computes on; -1 on the CPU. Set before the
  // communicator is made (accel.core.dist.init).
  int cuda_device = -1;
  std::chrono::milliseconds timeout{30 * 60 * 1000};
  // Before every collective, check across ranks that all call the same one
  // with the same shapes and dtypes (accel-run --debug; one small
  // all_gather more per collective).
  bool debug = false;
  // Gloo only: when every rank runs on this machine, all_reduce of CPU
  // tensors goes through a shared memory segment instead of loopback TCP
  // (engine/comm/shared_memory_communicator.h). make_communicator also turns
  // it off when the environment sets ACCEL_SHARED_MEMORY=0.
  bool shared_memory = true;
  // What the launcher handed this worker (engine/protocol/worker_variables.h,
  // take_worker_handoff): the store's secret (when empty, the environment's),
  // the prefix of the run's shared memory names, and the rank's error file,
  // where a collective that timed out records why ("" : stderr).
  std::string rdzv_token;
  std::string shm_prefix;
  std::string error_file;
};

// Where the recipe called the collective now starting ("recipe.lua:12"), for
// stall reports and error messages. The Lua bindings register a provider
// that reads it off the Lua stack; it is asked only on the thread that
// registered it (a Lua state belongs to one thread), and "" comes back
// elsewhere or without a provider. An empty provider unregisters.
using CallSiteProvider = std::function<std::string()>;
void set_call_site_provider(CallSiteProvider provider);
std::string current_call_site();

// While one lives, current_call_site() answers the site it was given on
// every thread, without asking the provider: a backward pins its recipe
// line once, and the gradient buckets it starts (from autograd's hooks, on
// any thread) report that line without walking the Lua stack each.
class PinnedCallSite {
 public:
  explicit PinnedCallSite(std::string site);
  ~PinnedCallSite();
  PinnedCallSite(const PinnedCallSite&) = delete;
  PinnedCallSite& operator=(const PinnedCallSite&) = delete;

 private:
  std::string previous_;
  bool was_pinned_;
};

// The backends this build can use, e.g. "gloo, mpi".
std::string compiled_backends();

// The communicator for this process: a no-op one when the world has one
// rank, else the requested backend joined through the launcher's store (Gloo
// behind shared memory when every rank is on this machine,
// engine/comm/shared_memory_communicator.h), wrapped so that every collective is published to that store for stall
// reports and times out with a message naming the ranks that did not
// arrive (engine/comm/monitored_communicator.h), and, with options.debug,
// checked across ranks first (engine/comm/checked_communicator.h).
std::unique_ptr<Communicator> make_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options);

}  // namespace accel
