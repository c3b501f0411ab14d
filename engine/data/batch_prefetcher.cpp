#include "engine/data/batch_prefetcher.h"

#include <algorithm>

namespace accel::data {

std::vector<at::Tensor> take_rows(const std::vector<at::Tensor>& tensors, const at::Tensor& rows) {
  std::vector<at::Tensor> out;
  out.reserve(tensors.size());
  for (const at::Tensor& t : tensors) out.push_back(t.index_select(0, rows));
  return out;
}

BatchPrefetcher::BatchPrefetcher(std::vector<at::Tensor> tensors, at::Tensor rows,
                                 int64_t batch_size, int64_t num_workers, int64_t capacity,
                                 std::chrono::milliseconds idle_exit)
    : tensors_(std::move(tensors)),
      rows_(std::move(rows)),
      batch_size_(batch_size),
      num_batches_(batch_size > 0 ? (rows_.numel() + batch_size - 1) / batch_size : 0),
      capacity_(capacity),
      num_workers_(num_workers),
      idle_exit_(idle_exit) {
  TORCH_CHECK(batch_size >= 1, "BatchPrefetcher: batch_size must be >= 1, got ", batch_size);
  TORCH_CHECK(num_workers >= 1, "BatchPrefetcher: num_workers must be >= 1, got ", num_workers);
  TORCH_CHECK(capacity >= 1, "BatchPrefetcher: capacity must be >= 1, got ", capacity);
  TORCH_CHECK(rows_.dim() == 1 && rows_.scalar_type() == at::kLong,
              "BatchPrefetcher: rows must be a 1-D int64 tensor");
  std::lock_guard<std::mutex> lock(mutex_);
  start_workers();
}

void BatchPrefetcher::start_workers() {
  // Ended workers left work() under the lock this caller holds: joining
  // them waits only for their return.
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  const int64_t threads = std::min(num_workers_, num_batches_ - next_claim_);
  for (int64_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  running_ = std::max<int64_t>(threads, 0);
}

BatchPrefetcher::~BatchPrefetcher() { close(); }

void BatchPrefetcher::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
  }
  room_.notify_all();
  for (std::thread& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  slots_.clear();
}

at::Tensor BatchPrefetcher::batch_rows(int64_t k) const {
  const int64_t first = k * batch_size_;
  return rows_.narrow(0, first, std::min(batch_size_, rows_.numel() - first));
}

void BatchPrefetcher::work() {
  // Data tensors may require grad; gathering them builds no graph.
  at::NoGradGuard no_grad;
  for (;;) {
    int64_t k = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      bool woke = room_.wait_for(lock, idle_exit_, [this] {
        return closing_ || next_claim_ >= num_batches_ || next_claim_ < next_take_ + capacity_;
      });
      if (!woke || closing_ || next_claim_ >= num_batches_) {
        --running_;
        return;
      }
      k = next_claim_++;
    }
    Slot slot;
    try {
      slot.tensors = take_rows(tensors_, batch_rows(k));
    } catch (...) {
      slot.error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slots_.emplace(k, std::move(slot));
    }
    ready_.notify_all();
  }
}

bool BatchPrefetcher::next(std::vector<at::Tensor>& batch) {
  Slot slot;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    TORCH_CHECK(!closing_, "BatchPrefetcher: next() after close()");
    if (next_take_ >= num_batches_) return false;
    if (running_ == 0) start_workers();
    ready_.wait(lock, [this] { return slots_.count(next_take_) > 0; });
    auto found = slots_.find(next_take_);
    slot = std::move(found->second);
    slots_.erase(found);
    ++next_take_;
  }
  room_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  batch = std::move(slot.tensors);
  return true;
}

}  // namespace accel::data
