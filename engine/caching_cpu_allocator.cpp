#include "engine/caching_cpu_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>
#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <map>

#include "engine/compat.h"

namespace accel {
namespace {

constexpr size_t kAlignment = 64;  // LibTorch's CPU alignment
constexpr size_t kLargestCached = 1024;
constexpr size_t kSizeClasses = kLargestCached / kAlignment;
constexpr uint32_t kUncached = kSizeClasses;    // the size class of larger blocks
constexpr uint32_t kMapped = kSizeClasses + 1;  // the size class of mapped blocks
constexpr uint32_t kKeptPerClass = 64;
constexpr size_t kLargestPooled = size_t{16} << 20;
constexpr size_t kPoolCapacity = size_t{64} << 20;
constexpr size_t kMappedCapacity = size_t{256} << 20;

// Each block starts with this header, one alignment unit long so the data
// after it stays aligned; the data pointer is also the deleter's context,
// as LibTorch's raw_allocate requires.
struct alignas(kAlignment) BlockHeader {
  uint32_t size_class;
  BlockHeader* next_free;
  size_t bytes;  // of the data, for the pool of larger blocks
};

BlockHeader* header_of(void* data) { return static_cast<BlockHeader*>(data) - 1; }

// Trivially destructible, so it needs no construction guard and one TLS
// lookup per call reaches all of it (workers run this code from the
// dlopen'ed libaccel_worker.so, where every thread_local access is a call);
// blocks freed while the thread ends, after its cache was emptied, go
// straight back to c10.
struct ThreadBlocks {
  std::array<BlockHeader*, kSizeClasses> free;
  std::array<uint32_t, kSizeClasses> count;
  bool flush_registered;
  bool gone;
};
thread_local ThreadBlocks t_blocks{};

// Hands a thread's cached blocks back to c10 when the thread ends.
struct ThreadExitFlush {
  ~ThreadExitFlush() {
    ThreadBlocks& blocks = t_blocks;
    blocks.gone = true;
    for (BlockHeader* head : blocks.free) {
      while (head) {
        BlockHeader* next = head->next_free;
        c10::free_cpu(head);
        head = next;
      }
    }
  }
};

void register_thread_exit_flush(ThreadBlocks& blocks) {
  thread_local ThreadExitFlush flush;
  (void)flush;
  blocks.flush_registered = true;
}

// Blocks above kLargestPooled are mapped here rather than taken from glibc,
// whose heap they would otherwise grow for good (the header says how).
size_t mapping_length(size_t bytes) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return (sizeof(BlockHeader) + bytes + page - 1) / page * page;
}

BlockHeader* map_block(size_t bytes) {
  void* mapping = ::mmap(nullptr, mapping_length(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(mapping != MAP_FAILED, "CPU allocator: cannot map ", bytes, " bytes (", std::strerror(errno), ")");
  auto* header = static_cast<BlockHeader*>(mapping);
  header->bytes = bytes;
  return header;
}

void unmap_block(BlockHeader* header) { ::munmap(header, mapping_length(header->bytes)); }

void free_heap_block(BlockHeader* header) { c10::free_cpu(header); }

// Blocks shared by all threads, newest first, up to a capacity; `dispose`
// returns those it does not keep to where they came from. A request takes
// the smallest block of at least its size and at most `slack_eighths`
// eighths more (0: the exact size).
class BlockPool {
 public:
  BlockPool(size_t capacity, size_t slack_eighths, void (*dispose)(BlockHeader*))
      : capacity_(capacity), slack_eighths_(slack_eighths), dispose_(dispose) {}

  BlockHeader* take(size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > bytes + bytes / 8 * slack_eighths_) return nullptr;
    BlockHeader* header = it->second;
    if (header->next_free) {
      it->second = header->next_free;
    } else {
      free_.erase(it);
    }
    pooled_ -= header->bytes;
    return header;
  }
  void keep_or_dispose(BlockHeader* header) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (pooled_ + header->bytes <= capacity_) {
        BlockHeader*& head = free_[header->bytes];
        header->next_free = head;
        head = header;
        pooled_ += header->bytes;
        return;
      }
    }
    dispose_(header);
  }
  size_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return pooled_;
  }
  void flush() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, head] : free_) {
      while (head) {
        BlockHeader* next = head->next_free;
        dispose_(head);
        head = next;
      }
    }
    free_.clear();
    pooled_ = 0;
  }

 private:
  const size_t capacity_;
  const size_t slack_eighths_;
  void (*const dispose_)(BlockHeader*);
  std::mutex mutex_;
  std::map<size_t, BlockHeader*> free_;  // by size; never an empty list
  size_t pooled_ = 0;
};

// Never destroyed: blocks may be freed during static destruction.
BlockPool& large_blocks() {
  static auto* pool = new BlockPool(kPoolCapacity, 0, &free_heap_block);
  return *pool;
}

BlockPool& mapped_blocks() {
  static auto* pool = new BlockPool(kMappedCapacity, 1, &unmap_block);
  return *pool;
}

// cpu_memory_stats(): bytes of live blocks over 1 KiB, and their peak.
std::atomic<int64_t> g_allocated{0};
std::atomic<int64_t> g_peak_allocated{0};

void count_allocated(int64_t bytes) {
  const int64_t now = g_allocated.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  int64_t peak = g_peak_allocated.load(std::memory_order_relaxed);
  while (now > peak && !g_peak_allocated.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void release(void* data) {
  if (!data) return;
  BlockHeader* header = header_of(data);
  uint32_t size_class = header->size_class;
  if (size_class >= kSizeClasses) g_allocated.fetch_sub(static_cast<int64_t>(header->bytes), std::memory_order_relaxed);
  if (size_class < kSizeClasses) {
    ThreadBlocks& blocks = t_blocks;
    if (!blocks.gone && blocks.count[size_class] < kKeptPerClass) {
      if (!blocks.flush_registered) register_thread_exit_flush(blocks);
      header->next_free = blocks.free[size_class];
      blocks.free[size_class] = header;
      ++blocks.count[size_class];
      return;
    }
    c10::free_cpu(header);
  } else if (size_class == kUncached) {
    large_blocks().keep_or_dispose(header);
  } else {
    mapped_blocks().keep_or_dispose(header);
  }
}

BlockHeader* take_cached(size_t size_class) {
  ThreadBlocks& blocks = t_blocks;
  BlockHeader* header = blocks.free[size_class];
  if (header) {
    blocks.free[size_class] = header->next_free;
    --blocks.count[size_class];
  }
  return header;
}

class CachingCpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t bytes) ACCEL_ALLOCATE_CONST override {
    const c10::Device cpu(c10::DeviceType::CPU);
    if (bytes == 0) return {nullptr, nullptr, &release, cpu};
    size_t size_class = (bytes - 1) / kAlignment;
    BlockHeader* header = nullptr;
    if (size_class < kSizeClasses) {
      header = take_cached(size_class);
      if (!header) {
        header = static_cast<BlockHeader*>(c10::alloc_cpu(sizeof(BlockHeader) + (size_class + 1) * kAlignment));
      }
    } else if (bytes <= kLargestPooled) {
      header = large_blocks().take(bytes);
      if (!header) {
        header = static_cast<BlockHeader*>(c10::alloc_cpu(sizeof(BlockHeader) + bytes));
        header->bytes = bytes;
      }
      size_class = kUncached;
    } else {
      header = mapped_blocks().take(bytes);
      if (!header) header = map_block(bytes);
      size_class = kMapped;
    }
    header->size_class = static_cast<uint32_t>(size_class);
    if (size_class >= kSizeClasses) count_allocated(static_cast<int64_t>(header->bytes));
    void* data = header + 1;
    return {data, data, &release, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  ACCEL_ALLOCATOR_COPY_DATA
};

}  // namespace

void install_caching_cpu_allocator() {
  static CachingCpuAllocator allocator;
  // Above the priority of LibTorch's default, which registers at 0.
  c10::SetCPUAllocator(&allocator, /*priority=*/1);
}

size_t small_blocks_cached() {
  const ThreadBlocks& blocks = t_blocks;
  if (blocks.gone) return 0;
  size_t total = 0;
  for (uint32_t n : blocks.count) total += n;
  return total;
}

size_t large_bytes_pooled() { return large_blocks().pooled_bytes() + mapped_blocks().pooled_bytes(); }

CpuMemoryStats cpu_memory_stats() {
  return {g_allocated.load(std::memory_order_relaxed), g_peak_allocated.load(std::memory_order_relaxed),
          static_cast<int64_t>(large_bytes_pooled())};
}

void reset_peak_cpu_memory() { g_peak_allocated.store(g_allocated.load(std::memory_order_relaxed)); }

void release_pooled_blocks() {
  large_blocks().flush();
  mapped_blocks().flush();
  ::malloc_trim(0);
}

}  // namespace accel
