// The CPU allocator of worker processes. It keeps freed blocks for reuse:
//
// - Blocks of up to 1 KiB stay with the thread that freed them, up to 64 per
//   64-byte size, and the most recently freed is handed out first on that
//   thread's next request of its size.
// - Larger blocks, up to 16 MiB, go to a pool shared by all threads, by
//   exact size, newest first, holding at most 64 MiB; past that they go back
//   to c10.
// - Blocks over 16 MiB are mapped by this allocator (mmap), not taken from
//   glibc, and kept up to 256 MiB in all; a request takes the smallest kept
//   block of its size up to an eighth more, so units of nearly equal sizes
//   share blocks. Past 256 MiB they are unmapped, their memory going back to
//   the system at once.
//
// Lua frees dead tensors when its collector finalizes them, in runs, long
// after they died. Freed in runs, small blocks overflow glibc's per-thread
// cache into its coalescing bins, and LibTorch's 64-byte-aligned requests
// never take from that cache at all: a small op called from Lua paid more
// for its output's memory than for its arithmetic. Newest first matters:
// a queue that released dead tensors oldest first (one per new tensor) ran
// fewer instructions but was 10-15% slower, its memory having left the
// cache (bench/RESULTS.md's git history).
//
// Larger blocks returned to glibc get split by the small objects that live
// on in Lua's garbage (handles, autograd nodes) until the collector runs, so
// the next step's activations found no hole of their size and the heap grew
// by about a step's activations per step between collections (digits-mlp:
// 177 -> 237 MiB). Held by size, a training step's activations come back to
// the next step, still in cache, as a C++ loop's would.
//
// Blocks over 16 MiB from glibc came from its heap once its mmap threshold
// had risen to their size (it rises when a mapped block is freed, up to
// 32 MiB), and the heap, split by small objects living between them, grew by
// such blocks step after step: a sharded model's unit gathers and gradient
// buckets (27 MiB for a transformer block of width 768) took a rank from
// 1.9 GiB after 2 steps to 3.9 GiB after 15. Mapped and kept by size, the
// same sizes come back every step without a page fault.
//
// Every block keeps LibTorch's 64-byte alignment.
#pragma once

#include <cstddef>

namespace accel {

// Makes this allocator LibTorch's CPU allocator for the whole process.
void install_caching_cpu_allocator();

// Small blocks the calling thread holds for reuse, over all sizes.
size_t small_blocks_cached();

// Bytes of larger blocks the shared pool holds for reuse.
size_t large_bytes_pooled();

// Bytes of blocks over 1 KiB (what tensors of more than 256 floats take):
// held by live tensors now, at most since the process started or
// reset_peak_cpu_memory(), and kept in the pools for reuse. The smaller
// blocks are left out, so that their allocations stay free of shared
// counters; they hold little. For telling a process's resident memory apart
// into what its tensors need and what the allocator keeps (bench/README.md,
// "sharding_memory").
struct CpuMemoryStats {
  int64_t allocated = 0;
  int64_t peak_allocated = 0;
  int64_t pooled = 0;
};
CpuMemoryStats cpu_memory_stats();
void reset_peak_cpu_memory();

// Gives the shared pools' blocks back (acc:free_memory(), and a sharded
// model once it has freed its full parameters), then glibc's free heap
// memory to the system (malloc_trim); the small blocks of each thread stay
// (at most 64 KiB a size, a thread).
void release_pooled_blocks();

}  // namespace accel
