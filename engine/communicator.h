// The collectives a training run needs, independent of the transport.
// One implementation per backend file (gloo_communicator.cpp, ...); the rest
// of the engine only sees this interface.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace accel {

struct ProcessState;

enum class ReduceOp { Sum, Average, Max, Min };

// A collective that could not complete: a peer closed its connection (it
// died or failed), or the operation timed out. Usually the consequence of
// another rank's failure, so launchers report it as such.
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An operation started asynchronously; wait() blocks until it completes.
class PendingOp {
 public:
  virtual ~PendingOp() = default;
  virtual void wait() = 0;
};

// How many collectives ran, by kind: tests use it to prove that a step did
// (or did not) communicate.
struct CollectiveCounts {
  int64_t all_reduce = 0;
  int64_t broadcast = 0;
  int64_t all_gather = 0;
  int64_t barrier = 0;
};

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
  virtual void barrier() = 0;

  const CollectiveCounts& counts() const { return counts_; }

 protected:
  CollectiveCounts counts_;
};

struct CommunicatorOptions {
  std::string backend = "gloo";
  std::chrono::milliseconds timeout{30 * 60 * 1000};
};

// The communicator for this process: a no-op one when the world has one
// rank, else the requested backend joined through the launcher's store.
std::unique_ptr<Communicator> make_communicator(const ProcessState& state,
                                                const CommunicatorOptions& options);

}  // namespace accel
