// The worker's CPU allocator: small blocks are reused on the freeing thread,
// up to a cap per size; larger ones through a shared pool by exact size, up
// to a cap in bytes; every block keeps LibTorch's 64-byte alignment.
#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "engine/caching_cpu_allocator.h"

namespace {

void install_once() {
  static bool installed = (accel::install_caching_cpu_allocator(), true);
  (void)installed;
}

uintptr_t address_of(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

}  // namespace

TEST_CASE("the caching allocator becomes LibTorch's CPU allocator", "[allocator]") {
  install_once();
  at::Tensor t = at::empty({16});
  REQUIRE(t.storage().allocator() == c10::GetCPUAllocator());
  CHECK(address_of(t) % 64 == 0);
}

TEST_CASE("a freed small block is reused by the next request of its size", "[allocator]") {
  install_once();
  uintptr_t first = address_of(at::empty({16}));  // freed at the end of the statement
  at::Tensor again = at::empty({16});
  CHECK(address_of(again) == first);
  // 100 bytes and 64 bytes are different size classes.
  at::Tensor other = at::empty({25});
  CHECK(address_of(other) != first);
}

TEST_CASE("live blocks of every small size are aligned and do not overlap", "[allocator]") {
  install_once();
  std::vector<at::Tensor> live;
  for (int64_t bytes = 4; bytes <= 1100; bytes += 4) {
    live.push_back(at::full({bytes / 4}, static_cast<float>(bytes)));
  }
  for (const at::Tensor& t : live) {
    CHECK(address_of(t) % 64 == 0);
    float expected = static_cast<float>(t.numel() * 4);
    CHECK(t.eq(expected).all().item<bool>());
  }
}

TEST_CASE("each small size keeps at most 64 blocks, and larger blocks are not among them", "[allocator]") {
  install_once();
  size_t before = accel::small_blocks_cached();
  {
    std::vector<at::Tensor> many;
    for (int i = 0; i < 100; ++i) many.push_back(at::empty({200}));  // 800 bytes
  }
  size_t after_small = accel::small_blocks_cached();
  CHECK(after_small <= before + 64);
  CHECK(after_small >= 64);
  { at::Tensor large = at::empty({1024}); }  // 4 KiB: to the shared pool
  CHECK(accel::small_blocks_cached() == after_small);
}

TEST_CASE("empty tensors and blocks freed on another thread", "[allocator]") {
  install_once();
  at::Tensor empty = at::empty({0});
  CHECK(empty.numel() == 0);

  at::Tensor made_here = at::full({8}, 3.0f);
  size_t cached_on_other_thread = 0;
  std::thread other([&] {
    CHECK(accel::small_blocks_cached() == 0);  // each thread has its own cache
    made_here.reset();
    cached_on_other_thread = accel::small_blocks_cached();
    at::Tensor reused = at::full({8}, 5.0f);
    CHECK(reused.sum().item<float>() == 40.0f);
  });
  other.join();
  CHECK(cached_on_other_thread == 1);
}

TEST_CASE("a freed larger block is reused by the next request of its exact size", "[allocator]") {
  install_once();
  accel::release_pooled_blocks();
  uintptr_t first = address_of(at::empty({16384}));  // 64 KiB, freed at once
  CHECK(accel::large_bytes_pooled() == 65536);
  CHECK(address_of(at::empty({16385})) != first);  // 4 bytes more: another size
  at::Tensor again = at::full({16384}, 2.0f);
  CHECK(address_of(again) == first);
  CHECK(accel::large_bytes_pooled() == 16385 * 4);  // only the other size waits
  CHECK(again.sum().item<float>() == 32768.0f);
  CHECK(address_of(again) % 64 == 0);
}

TEST_CASE("the pool holds at most 64 MiB of blocks up to 16 MiB, and empties on request", "[allocator]") {
  install_once();
  accel::release_pooled_blocks();
  {
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < 10; ++i) blocks.push_back(at::empty({(int64_t{8} << 20) / 4}));  // 80 MiB
  }
  CHECK(accel::large_bytes_pooled() == size_t{64} << 20);
  at::Tensor from_pool = at::empty({(int64_t{8} << 20) / 4});
  CHECK(accel::large_bytes_pooled() == size_t{56} << 20);
  accel::release_pooled_blocks();
  CHECK(accel::large_bytes_pooled() == 0);
}

TEST_CASE("blocks over 16 MiB are mapped and reused up to an eighth larger, up to 256 MiB held", "[allocator]") {
  install_once();
  accel::release_pooled_blocks();
  const int64_t just_over = (int64_t{16} << 20) / 4 + 1;  // floats: 16 MiB and 4 bytes
  uintptr_t first = address_of(at::empty({just_over}));
  CHECK(accel::large_bytes_pooled() == static_cast<size_t>(just_over) * 4);
  at::Tensor again = at::full({just_over}, 1.0f);
  CHECK(address_of(again) == first);
  CHECK(address_of(again) % 64 == 0);
  CHECK(again.sum().item<double>() == static_cast<double>(just_over));
  CHECK(accel::large_bytes_pooled() == 0);
  again = at::Tensor();
  accel::release_pooled_blocks();
  const int64_t mib = (int64_t{1} << 20) / 4;  // floats in a MiB
  uintptr_t twenty = address_of(at::empty({20 * mib}));
  CHECK(address_of(at::empty({17 * mib})) != twenty);  // 20 MiB is more than an eighth over 17
  CHECK(address_of(at::empty({18 * mib})) == twenty);  // and less than an eighth over 18
  CHECK(accel::large_bytes_pooled() == size_t{17 + 20} << 20);  // each went back after its check
  accel::release_pooled_blocks();
  {
    std::vector<at::Tensor> blocks;
    for (int i = 0; i < 20; ++i) blocks.push_back(at::empty({(int64_t{20} << 20) / 4}));  // 400 MiB
  }
  CHECK(accel::large_bytes_pooled() == size_t{240} << 20);  // 12 of them; the rest were unmapped
  accel::release_pooled_blocks();
  CHECK(accel::large_bytes_pooled() == 0);
}

TEST_CASE("cpu_memory_stats counts live blocks over 1 KiB, their peak and what the pools keep", "[allocator]") {
  install_once();
  accel::release_pooled_blocks();
  const accel::CpuMemoryStats before = accel::cpu_memory_stats();
  CHECK(before.pooled == 0);
  accel::reset_peak_cpu_memory();
  CHECK(accel::cpu_memory_stats().peak_allocated == before.allocated);
  {
    at::Tensor medium = at::empty({(int64_t{1} << 20) / 4});  // 1 MiB, pooled by size
    at::Tensor mapped = at::empty({(int64_t{20} << 20) / 4});  // 20 MiB, mapped
    at::Tensor small = at::empty({16});                        // 64 bytes: not counted
    const accel::CpuMemoryStats live = accel::cpu_memory_stats();
    CHECK(live.allocated - before.allocated == int64_t{21} << 20);
    CHECK(live.peak_allocated == live.allocated);
  }
  const accel::CpuMemoryStats after = accel::cpu_memory_stats();
  CHECK(after.allocated == before.allocated);
  CHECK(after.peak_allocated - before.allocated == int64_t{21} << 20);
  CHECK(after.pooled == int64_t{21} << 20);
  accel::reset_peak_cpu_memory();
  CHECK(accel::cpu_memory_stats().peak_allocated == after.allocated);
  accel::release_pooled_blocks();
  CHECK(accel::cpu_memory_stats().pooled == 0);
}
