#include "engine/formats/kept_weights.h"

#include <ATen/ATen.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace accel::formats {

// The kept bytes, in a memfd of their own, with what makes them a tensor.
struct KeptWeights::Entry {
  int fd = -1;
  size_t bytes = 0;
  std::vector<int64_t> shape;
  at::ScalarType dtype = at::kFloat;
  bool used = true;
  ~Entry() {
    if (fd >= 0) ::close(fd);
  }
};

KeptWeights::KeptWeights() = default;
KeptWeights::~KeptWeights() = default;

c10::optional<at::Tensor> KeptWeights::find(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return c10::nullopt;
  const Entry& entry = *it->second;
  const size_t length = entry.bytes == 0 ? 1 : entry.bytes;
  // Private: the run's writes copy the pages they touch, for it alone.
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE, entry.fd, 0);
  if (base == MAP_FAILED) return c10::nullopt;
  it->second->used = true;
  ++found_;
  return at::from_blob(base, entry.shape, [base, length](void*) { ::munmap(base, length); },
                       at::TensorOptions().dtype(entry.dtype));
}

void KeptWeights::keep(const std::string& key, const at::Tensor& t) {
  entries_.erase(key);
  const at::Tensor bytes_of = t.contiguous();
  auto entry = std::make_unique<Entry>();
  entry->bytes = bytes_of.nbytes();
  entry->shape = bytes_of.sizes().vec();
  entry->dtype = bytes_of.scalar_type();
  entry->fd = ::memfd_create("accel-kept-weights", MFD_CLOEXEC);
  const size_t length = entry->bytes == 0 ? 1 : entry->bytes;
  if (entry->fd < 0 || ::ftruncate(entry->fd, static_cast<off_t>(length)) != 0) return;
  void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, entry->fd, 0);
  if (base == MAP_FAILED) return;
  std::memcpy(base, bytes_of.data_ptr(), entry->bytes);
  ::munmap(base, length);
  entries_[key] = std::move(entry);
}

void KeptWeights::end_run() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (!it->second->used) {
      it = entries_.erase(it);
    } else {
      it->second->used = false;
      ++it;
    }
  }
}

KeptWeights::Counts KeptWeights::counts() const {
  return {static_cast<int64_t>(entries_.size()), found_};
}

}  // namespace accel::formats
