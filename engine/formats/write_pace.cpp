#include "engine/formats/write_pace.h"

#include <time.h>

#include <cerrno>
#include <stdexcept>
#include <string>

namespace accel::formats {
namespace {

int64_t now_ns(clockid_t clock) {
  timespec t{};
  ::clock_gettime(clock, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

}  // namespace

WritePace::WritePace(double share) : share_(share) {
  if (!(share > 0.0 && share <= 1.0)) {
    throw std::invalid_argument("a writer's share of a core must be in (0, 1], got " + std::to_string(share));
  }
}

void WritePace::begin() {
  cpu_start_ns_ = now_ns(CLOCK_THREAD_CPUTIME_ID);
  wall_start_ns_ = now_ns(CLOCK_MONOTONIC);
}

void WritePace::after_chunk() {
  if (!paced()) return;
  const int64_t busy = now_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_start_ns_;
  const int64_t due = wall_start_ns_ + static_cast<int64_t>(static_cast<double>(busy) / share_);
  // Absolute sleeps: time the thread waited for a core counts as spent.
  const timespec until{static_cast<time_t>(due / 1000000000), static_cast<long>(due % 1000000000)};
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr) == EINTR) {
  }
}

}  // namespace accel::formats
