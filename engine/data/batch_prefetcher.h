// Gathers the rows of the next batches on background threads, so the
// training loop finds them ready. Batch k is the rows
// rows[k*B .. min((k+1)*B, rows.numel()) - 1] of every tensor; batches come
// out in order whatever thread gathered them, so the result is exactly what
// gathering them one by one on the caller's thread gives. At most
// `capacity` batches are gathered ahead of the consumer (a bounded queue).
// The threads run C++ only: no Lua, no autograd recording.
//
// Workers that find no room for `idle_exit` end: a loader left in the
// middle of an epoch (a loop ended with break, a prepared loader kept for
// checkpoints) holds its gathered batches but no threads. next() starts
// them again when batches remain.
#pragma once
#include <ATen/ATen.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace accel::data {

// The rows `rows` (0-based int64) of every tensor, along dim 0.
std::vector<at::Tensor> take_rows(const std::vector<at::Tensor>& tensors, const at::Tensor& rows);

class BatchPrefetcher {
 public:
  static constexpr std::chrono::milliseconds kIdleExit{1000};

  BatchPrefetcher(std::vector<at::Tensor> tensors, at::Tensor rows, int64_t batch_size,
                  int64_t num_workers, int64_t capacity, std::chrono::milliseconds idle_exit = kIdleExit);
  ~BatchPrefetcher();
  BatchPrefetcher(const BatchPrefetcher&) = delete;
  BatchPrefetcher& operator=(const BatchPrefetcher&) = delete;

  int64_t num_batches() const { return num_batches_; }
  // The next batch; false after the last one. A worker's error is rethrown
  // here, at the batch that failed.
  bool next(std::vector<at::Tensor>& batch);
  // Stops the workers; batches not taken are dropped.
  void close();

 private:
  struct Slot {
    std::vector<at::Tensor> tensors;
    std::exception_ptr error;
  };

  void work();
  // With the lock held and no worker running: joins the exited ones and
  // starts new ones, when batches remain to gather.
  void start_workers();
  at::Tensor batch_rows(int64_t k) const;

  const std::vector<at::Tensor> tensors_;
  const at::Tensor rows_;
  const int64_t batch_size_;
  const int64_t num_batches_;
  const int64_t capacity_;
  const int64_t num_workers_;
  const std::chrono::milliseconds idle_exit_;

  std::mutex mutex_;
  std::condition_variable ready_;  // a slot was filled
  std::condition_variable room_;   // a slot was taken, or closing
  std::map<int64_t, Slot> slots_;
  int64_t next_claim_ = 0;  // the next batch a worker starts
  int64_t next_take_ = 0;   // the next batch next() returns
  bool closing_ = false;
  int64_t running_ = 0;               // workers inside work()
  std::vector<std::thread> workers_;  // started; those that ended are joined by start_workers or close
};

}  // namespace accel::data
