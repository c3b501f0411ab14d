#include "engine/small_block_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <array>
#include <cstdint>

#include "engine/compat.h"

namespace accel {
namespace {

constexpr size_t kAlignment = 64;  // LibTorch's CPU alignment
constexpr size_t kLargestCached = 1024;
constexpr size_t kSizeClasses = kLargestCached / kAlignment;
constexpr uint32_t kUncached = kSizeClasses;  // the size class of larger blocks
constexpr uint32_t kKeptPerClass = 64;

// Each block starts with this header, one alignment unit long so the data
// after it stays aligned; the data pointer is also the deleter's context,
// as LibTorch's raw_allocate requires.
struct alignas(kAlignment) BlockHeader {
  uint32_t size_class;
  BlockHeader* next_free;
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

void release(void* data) {
  if (!data) return;
  BlockHeader* header = header_of(data);
  uint32_t size_class = header->size_class;
  if (size_class != kUncached) {
    ThreadBlocks& blocks = t_blocks;
    if (!blocks.gone && blocks.count[size_class] < kKeptPerClass) {
      if (!blocks.flush_registered) register_thread_exit_flush(blocks);
      header->next_free = blocks.free[size_class];
      blocks.free[size_class] = header;
      ++blocks.count[size_class];
      return;
    }
  }
  c10::free_cpu(header);
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

class SmallBlockAllocator final : public c10::Allocator {
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
    } else {
      header = static_cast<BlockHeader*>(c10::alloc_cpu(sizeof(BlockHeader) + bytes));
      size_class = kUncached;
    }
    header->size_class = static_cast<uint32_t>(size_class);
    void* data = header + 1;
    return {data, data, &release, cpu};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  ACCEL_ALLOCATOR_COPY_DATA
};

}  // namespace

void install_small_block_allocator() {
  static SmallBlockAllocator allocator;
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

}  // namespace accel
