#include "engine/comm/shared_memory_all_reduce.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <thread>

namespace accel {

namespace {

using Clock = std::chrono::steady_clock;

// How a waiting rank spends its time: polling first (a peer a few
// microseconds behind is met without a context switch), then yielding, then
// naps that grow to kLongestNap, checking every kCheckEvery whether the
// peer still runs and the timeout has passed.
constexpr auto kSpinFor = std::chrono::microseconds(200);
constexpr auto kYieldFor = std::chrono::milliseconds(2);
constexpr auto kLongestNap = std::chrono::milliseconds(1);
constexpr auto kCheckEvery = std::chrono::milliseconds(100);

// A slot holds this many bytes of one rank's chunk; two sets of `size`
// slots make the segment about 8 MiB whatever the number of ranks. At least
// 64 KiB, so that a reduce-scatter's chunk, one element of every rank's
// shard, fits a slot in any world of one machine.
int64_t chunk_bytes_for(int size) {
  const int64_t bytes = (int64_t{8} << 20) / (2 * size);
  return std::max<int64_t>(int64_t{64} << 10, bytes / 64 * 64);
}

struct alignas(64) Header {
  uint64_t token;
  int32_t size;
  int64_t chunk_bytes;
};

// One cache line per rank, so that polling one counter does not contend
// with writes to another.
struct alignas(64) RankCell {
  std::atomic<uint64_t> progress;  // 2 per chunk done, 2k + 1 mid-chunk
  std::atomic<int64_t> pid;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be address-free atomics");

std::string segment_name(const std::string& prefix, uint64_t token) {
  char name[40];
  std::snprintf(name, sizeof name, "all-reduce-%016llx", static_cast<unsigned long long>(token));
  return "/" + prefix + name;
}

[[noreturn]] void throw_errno(const std::string& what, const std::string& name) {
  throw std::runtime_error(what + " shared memory segment " + name + ": " + std::strerror(errno));
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// out = a `op` b, elementwise; `out` may be `a`.
void combine(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Average:
      at::add_out(out, a, b);
      break;
    case ReduceOp::Max:
      at::maximum_out(out, a, b);
      break;
    case ReduceOp::Min:
      at::minimum_out(out, a, b);
      break;
  }
}

// Exited, or a zombie its parent has not reaped yet.
bool process_gone(int64_t pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t after_name = line.rfind(')');
  if (after_name == std::string::npos || after_name + 2 >= line.size()) return false;
  const char state = line[after_name + 2];
  return state == 'Z' || state == 'X';
}

}  // namespace

struct SharedMemoryAllReduce::Segment {
  std::string name;
  void* base = MAP_FAILED;
  size_t bytes = 0;
  bool named = true;  // until unlink_name

  ~Segment() {
    if (base != MAP_FAILED) ::munmap(base, bytes);
  }
  static size_t cells_offset() { return sizeof(Header); }
  static size_t data_offset(int size) {
    const size_t end_of_cells = cells_offset() + sizeof(RankCell) * static_cast<size_t>(size);
    return (end_of_cells + 4095) / 4096 * 4096;
  }
  static size_t total_bytes(int size) {
    return data_offset(size) + 2 * static_cast<size_t>(size) * static_cast<size_t>(chunk_bytes_for(size));
  }
  Header& header() const { return *static_cast<Header*>(base); }
  RankCell& cell(int rank) const {
    return reinterpret_cast<RankCell*>(static_cast<char*>(base) + cells_offset())[rank];
  }
  char* slot(int set, int rank) const {
    const Header& h = header();
    return static_cast<char*>(base) + data_offset(h.size) +
           (static_cast<size_t>(set) * h.size + rank) * static_cast<size_t>(h.chunk_bytes);
  }
  void map(int fd) {
    base = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    if (base == MAP_FAILED) throw_errno("cannot map", name);
  }
};

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::create(int size, uint64_t token,
                                                                     Options options) {
  TORCH_CHECK(size >= 2, "a shared memory all-reduce needs 2 ranks or more, got ", size);
  auto segment = std::make_unique<Segment>();
  segment->name = segment_name(options.name_prefix, token);
  segment->bytes = Segment::total_bytes(size);
  const int fd = ::shm_open(segment->name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) throw_errno("cannot create", segment->name);
  // Reserved now, not on first touch: a full /dev/shm would otherwise kill
  // the process with SIGBUS in the middle of an all-reduce.
  if (const int error = ::posix_fallocate(fd, 0, static_cast<off_t>(segment->bytes))) {
    ::close(fd);
    ::shm_unlink(segment->name.c_str());
    errno = error;
    throw_errno("cannot reserve", segment->name);
  }
  try {
    segment->map(fd);
  } catch (...) {
    ::shm_unlink(segment->name.c_str());
    throw;
  }
  // A fresh segment is zeroed: every progress counter starts at 0.
  Header& h = segment->header();
  h.size = size;
  h.chunk_bytes = chunk_bytes_for(size);
  h.token = token;
  segment->cell(0).pid.store(::getpid(), std::memory_order_release);
  return std::unique_ptr<SharedMemoryAllReduce>(
      new SharedMemoryAllReduce(0, size, std::move(segment), options));
}

std::unique_ptr<SharedMemoryAllReduce> SharedMemoryAllReduce::open(int rank, int size, uint64_t token,
                                                                   Options options) {
  TORCH_CHECK(rank > 0 && rank < size, "rank ", rank, " opens the segment of a world of ", size);
  auto segment = std::make_unique<Segment>();
  segment->name = segment_name(options.name_prefix, token);
  segment->named = false;  // rank 0 removes the name
  const int fd = ::shm_open(segment->name.c_str(), O_RDWR, 0);
  if (fd < 0) throw_errno("cannot open", segment->name);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != Segment::total_bytes(size)) {
    ::close(fd);
    throw std::runtime_error("shared memory segment " + segment->name + " has an unexpected size");
  }
  segment->bytes = static_cast<size_t>(st.st_size);
  segment->map(fd);
  const Header& h = segment->header();
  if (h.token != token || h.size != size) {
    throw std::runtime_error("shared memory segment " + segment->name + " belongs to another run");
  }
  segment->cell(rank).pid.store(::getpid(), std::memory_order_release);
  return std::unique_ptr<SharedMemoryAllReduce>(
      new SharedMemoryAllReduce(rank, size, std::move(segment), options));
}

SharedMemoryAllReduce::SharedMemoryAllReduce(int rank, int size, std::unique_ptr<Segment> segment,
                                             Options options)
    : rank_(rank), size_(size), segment_(std::move(segment)), options_(options) {}

SharedMemoryAllReduce::~SharedMemoryAllReduce() { unlink_name(); }

void SharedMemoryAllReduce::unlink_name() {
  if (!segment_->named) return;
  ::shm_unlink(segment_->name.c_str());
  segment_->named = false;
}

bool SharedMemoryAllReduce::supports(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() != at::kBool &&
         !t.is_complex() && !t.is_quantized();
}

template <class Body>
void SharedMemoryAllReduce::guarded(const char* operation, Body&& body) {
  operation_ = operation;
  if (broken_) {
    throw CollectiveError(std::string(operation) +
                          " over shared memory: an earlier collective failed, so the ranks are out of step");
  }
  try {
    body();
  } catch (...) {
    broken_ = true;
    throw;
  }
}

template <class Fill, class Consume>
void SharedMemoryAllReduce::exchange_chunk(Fill&& fill, Consume&& consume) {
  const int set = static_cast<int>(chunks_done_ % 2);
  const uint64_t progress = 2 * chunks_done_;
  fill(segment_->slot(set, rank_));
  meet(progress + 1);
  consume(set);
  // Done reading: no need to wait for the others, whose next meeting says
  // the same of them before anyone writes this set again.
  segment_->cell(rank_).progress.store(progress + 2, std::memory_order_release);
  ++chunks_done_;
}

void SharedMemoryAllReduce::meet(uint64_t progress) {
  segment_->cell(rank_).progress.store(progress, std::memory_order_release);
  wait_for_all(progress);
}

void SharedMemoryAllReduce::all_reduce(at::Tensor& t, ReduceOp op) {
  TORCH_CHECK(supports(t), "all_reduce over shared memory: unsupported tensor ", t.toString());
  at::NoGradGuard no_grad;
  at::Tensor work = t.contiguous();
  guarded("all_reduce", [&] {
    const int64_t element_size = static_cast<int64_t>(work.element_size());
    const int64_t chunk_numel = segment_->header().chunk_bytes / element_size;
    char* data = static_cast<char*>(work.data_ptr());
    for (int64_t done = 0, total = work.numel(); done < total;) {
      const int64_t numel = std::min(chunk_numel, total - done);
      reduce_chunk(data + done * element_size, numel, element_size, work, op);
      done += numel;
    }
  });
  if (!work.is_same(t)) t.copy_(work);
  if (op == ReduceOp::Average) t.div_(size_);
}

// Chunk k holds elements [k*m, (k+1)*m) of every rank's shard, shard after
// shard, in each rank's slot; rank r reduces the r-th piece of every slot
// straight into its output.
void SharedMemoryAllReduce::reduce_scatter(at::Tensor& output, const at::Tensor& input, ReduceOp op) {
  TORCH_CHECK(supports(output), "reduce_scatter over shared memory: unsupported tensor ", output.toString());
  at::NoGradGuard no_grad;
  guarded("reduce_scatter", [&] {
    const int64_t n = output.numel();
    const int64_t element_size = static_cast<int64_t>(output.element_size());
    const int64_t piece_numel = segment_->header().chunk_bytes / (size_ * element_size);
    const char* in = static_cast<const char*>(input.data_ptr());
    const auto options = at::TensorOptions().dtype(output.scalar_type());
    for (int64_t done = 0; done < n; done += piece_numel) {
      const int64_t numel = std::min(piece_numel, n - done);
      const size_t bytes = static_cast<size_t>(numel * element_size);
      exchange_chunk(
          [&](char* slot) {
            for (int q = 0; q < size_; ++q) {
              std::memcpy(slot + q * bytes, in + (q * n + done) * element_size, bytes);
            }
          },
          [&](int set) {
            auto piece_of = [&](int q) {
              return at::from_blob(segment_->slot(set, q) + rank_ * bytes, {numel}, options);
            };
            at::Tensor out = output.narrow(0, done, numel);
            combine(out, piece_of(0), piece_of(1), op);
            for (int q = 2; q < size_; ++q) combine(out, out, piece_of(q), op);
          });
    }
  });
  if (op == ReduceOp::Average) output.div_(size_);
}

// Chunk k holds elements [k*m, (k+1)*m) of each rank's input in its slot;
// every rank copies every slot, its own too (the same bytes when in place),
// to where that rank's input lands in `output`.
void SharedMemoryAllReduce::all_gather(at::Tensor& output, const at::Tensor& input) {
  TORCH_CHECK(supports(output), "all_gather_into over shared memory: unsupported tensor ", output.toString());
  guarded("all_gather_into", [&] {
    const int64_t n = input.numel();
    const int64_t element_size = static_cast<int64_t>(input.element_size());
    const int64_t chunk_numel = segment_->header().chunk_bytes / element_size;
    const char* in = static_cast<const char*>(input.data_ptr());
    char* out = static_cast<char*>(output.data_ptr());
    for (int64_t done = 0; done < n; done += chunk_numel) {
      const size_t bytes = static_cast<size_t>(std::min(chunk_numel, n - done) * element_size);
      exchange_chunk([&](char* slot) { std::memcpy(slot, in + done * element_size, bytes); },
                     [&](int set) {
                       for (int q = 0; q < size_; ++q) {
                         std::memcpy(out + (q * n + done) * element_size, segment_->slot(set, q), bytes);
                       }
                     });
    }
  });
}

void SharedMemoryAllReduce::reduce_chunk(char* data, int64_t numel, int64_t element_size,
                                         const at::Tensor& like, ReduceOp op) {
  const int set = static_cast<int>(chunks_done_ % 2);
  const uint64_t progress = 2 * chunks_done_;
  auto slice_begin = [&](int rank) { return numel * rank / size_; };

  std::memcpy(segment_->slot(set, rank_), data, static_cast<size_t>(numel * element_size));
  meet(progress + 1);

  // Reduce this rank's slice of every slot into its own slot.
  const int64_t begin = slice_begin(rank_);
  const int64_t length = slice_begin(rank_ + 1) - begin;
  if (length > 0) {
    const auto options = at::TensorOptions().dtype(like.scalar_type());
    auto slice_of = [&](int rank) {
      return at::from_blob(segment_->slot(set, rank) + begin * element_size, {length}, options);
    };
    at::Tensor acc = slice_of(rank_);
    for (int q = 0; q < size_; ++q) {
      if (q != rank_) combine(acc, acc, slice_of(q), op);
    }
  }
  // Unlike the chunks of exchange_chunk, the others must have reduced
  // before anyone copies the reduced slices out.
  meet(progress + 2);

  for (int q = 0; q < size_; ++q) {
    const int64_t from = slice_begin(q);
    std::memcpy(data + from * element_size, segment_->slot(set, q) + from * element_size,
                static_cast<size_t>((slice_begin(q + 1) - from) * element_size));
  }
  ++chunks_done_;
}

void SharedMemoryAllReduce::wait_for_all(uint64_t progress) {
  const Clock::time_point start = Clock::now();
  Clock::time_point next_check = start + kCheckEvery;
  for (int q = 0; q < size_; ++q) {
    const RankCell& cell = segment_->cell(q);
    while (cell.progress.load(std::memory_order_acquire) < progress) {
      const Clock::time_point now = Clock::now();
      const auto waited = now - start;
      if (options_.spin && waited < kSpinFor) {
        for (int i = 0; i < 16; ++i) cpu_relax();
        continue;
      }
      if (waited < kYieldFor) {
        ::sched_yield();
      } else {
        std::this_thread::sleep_for(
            std::min<Clock::duration>(kLongestNap, std::chrono::duration_cast<Clock::duration>(waited / 16)));
      }
      if (now < next_check) continue;
      next_check = now + kCheckEvery;
      const int64_t pid = cell.pid.load(std::memory_order_acquire);
      if (process_gone(pid)) {
        throw CollectiveError(std::string(operation_) + " over shared memory: rank " + std::to_string(q) +
                              " (pid " + std::to_string(pid) + ") exited");
      }
      if (waited >= options_.timeout) {
        char message[160];
        std::snprintf(message, sizeof message, "%s over shared memory: rank %d did not arrive within %g s",
                      operation_, q, static_cast<double>(options_.timeout.count()) / 1000);
        throw CollectiveError(message);
      }
    }
  }
}

}  // namespace accel
