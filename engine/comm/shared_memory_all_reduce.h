// All-reduce between the processes of one machine through a shared memory
// segment, for SharedMemoryCommunicator (engine/comm/shared_memory_communicator.h)
// over Gloo when every rank is local: Gloo's TCP path over loopback costs
// several thread wake-ups per message (about 0.2 ms for one float, 2 ms for
// 340 KB on a 2-core machine), while ranks that poll a shared counter meet
// in about a microsecond.
//
// The tensor goes through the segment in chunks. Per chunk, each rank
// copies its part into its own slot, reduces one slice of the chunk across
// every slot, and copies the reduced slices back out: two meetings per
// chunk, on per-rank progress counters. Two sets of slots alternate, so a
// rank may fill the next chunk while the others still read the last one.
// Every element is reduced by one rank only, so all ranks get the same bits.
//
// The same segment carries the flat reduce-scatter and all-gather of
// sharded data parallelism, which need one meeting per chunk: each rank
// fills its slot, all meet, each reads what it needs from every slot. A
// rank's next meeting tells the others it has finished reading, before the
// alternating set comes round to be written again. A reduce-scatter reads
// only its own shard's piece of each slot; an all-gather copies every slot.
//
// A rank waiting for the others polls, then yields, then sleeps, and fails
// with CollectiveError when a peer process has exited or the timeout has
// passed; after a failure the segment is not used again.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/comm/communicator.h"

namespace at {
class Tensor;
}

namespace accel {

class SharedMemoryAllReduce {
 public:
  struct Options {
    std::chrono::milliseconds timeout{30 * 60 * 1000};
    // Poll before yielding: right when each rank has a core of its own,
    // wasteful when ranks outnumber cores.
    bool spin = true;
    // The segment is "/<name_prefix>all-reduce-<token>": the launcher gives
    // each run its own prefix (ACCEL_SHM_PREFIX), and removes every name
    // with it when the run's workers have ended.
    std::string name_prefix = "accel-";
  };

  // Rank 0 creates the segment (named after `token`, which the other ranks
  // must receive from it) and every other rank opens it. Throws
  // std::runtime_error when the segment cannot be created or opened, or
  // holds another token (it belongs to another machine or run).
  static std::unique_ptr<SharedMemoryAllReduce> create(int size, uint64_t token, Options options);
  static std::unique_ptr<SharedMemoryAllReduce> open(int rank, int size, uint64_t token,
                                                     Options options);
  ~SharedMemoryAllReduce();
  SharedMemoryAllReduce(const SharedMemoryAllReduce&) = delete;
  SharedMemoryAllReduce& operator=(const SharedMemoryAllReduce&) = delete;

  // Removes the segment's name once every rank has opened it: the memory
  // lives on while mapped and goes away with the last process, whatever
  // way it ends.
  void unlink_name();

  // CPU tensors of the numeric types (not bool); others go to Gloo. The
  // answer depends only on dtype and device, so every rank answers alike.
  static bool supports(const at::Tensor& t);

  // In place; Average divides the sum by the number of ranks. Every rank
  // calls it with the same shape and dtype, one call at a time.
  void all_reduce(at::Tensor& t, ReduceOp op);
  // Communicator::reduce_scatter and all_gather_into, on arguments already
  // checked (engine/comm/flat_collective_args.h): flat, contiguous, sized for
  // this world. `input` of all_gather may be this rank's slice of `output`.
  void reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op);
  void all_gather(at::Tensor& output, const at::Tensor& input);

 private:
  struct Segment;
  SharedMemoryAllReduce(int rank, int size, std::unique_ptr<Segment> segment, Options options);
  // Runs a collective's chunks, refusing once an earlier one failed (the
  // ranks may be out of step) and marking the segment broken if it fails.
  template <class Body>
  void guarded(const char* operation, Body&& body);
  void reduce_chunk(char* data, int64_t numel, int64_t element_size, const at::Tensor& like,
                    ReduceOp op);
  // One chunk of one meeting: fill(this rank's slot), meet, consume(set).
  template <class Fill, class Consume>
  void exchange_chunk(Fill&& fill, Consume&& consume);
  // Marks this rank at `progress` and waits until every rank is.
  void meet(uint64_t progress);
  void wait_for_all(uint64_t progress);

  int rank_;
  int size_;
  std::unique_ptr<Segment> segment_;
  Options options_;
  uint64_t chunks_done_ = 0;
  bool broken_ = false;
  const char* operation_ = "all_reduce";  // the collective running, for errors
};

}  // namespace accel
