// The CPU allocator of worker processes: freed blocks of up to 1 KiB stay
// with the thread that freed them, up to 64 per size, and the most recently
// freed is handed out first on that thread's next request of its size.
//
// Lua frees dead tensors when its collector finalizes them, in runs, long
// after they died. Freed in runs, small blocks overflow glibc's per-thread
// cache into its coalescing bins, and LibTorch's 64-byte-aligned requests
// never take from that cache at all: a small op called from Lua paid more
// for its output's memory than for its arithmetic. Newest first matters:
// a queue that released dead tensors oldest first (one per new tensor) ran
// fewer instructions but was 10-15% slower, its memory having left the
// cache (bench/RESULTS.md). Larger blocks, and blocks past the per-thread
// limit, go to and from c10's own functions unchanged. Every block keeps
// LibTorch's 64-byte alignment.
#pragma once

#include <cstddef>

namespace accel {

// Makes this allocator LibTorch's CPU allocator for the whole process.
void install_small_block_allocator();

// Blocks the calling thread holds for reuse, over all sizes.
size_t small_blocks_cached();

}  // namespace accel
