#include "engine/formats/background_writer.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "engine/formats/atomic_folder.h"
#include "engine/formats/format_error.h"
#include "engine/formats/fault_injection.h"
#include "engine/formats/file_io.h"

namespace accel::formats {
namespace {

std::string marker_path(const std::string& folder, int rank) {
  return folder + "/.written-rank-" + std::to_string(rank);
}

}  // namespace

BackgroundWriter::~BackgroundWriter() {
  if (thread_.joinable()) thread_.join();
}

void BackgroundWriter::add(Step step) { queued_.push_back(std::move(step)); }

void BackgroundWriter::start(double share) {
  wait();
  WritePace pace(share);  // before anything changes: a bad share throws here
  std::vector<Step> steps = std::move(queued_);
  queued_.clear();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = true;
    error_ = nullptr;
  }
  thread_ = std::thread([this, pace, steps = std::move(steps)]() mutable {
    std::exception_ptr error;
    pace.begin();
    try {
      for (const Step& step : steps) {
        step(pace);
        fault_point("checkpoint-async-write");
      }
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = error;
    running_ = false;
  });
}

void BackgroundWriter::wait() {
  if (thread_.joinable()) thread_.join();
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    error = error_;
    error_ = nullptr;
  }
  if (error) std::rethrow_exception(error);
}

bool BackgroundWriter::finished() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !running_;
}

void write_rank_marker(const std::string& folder, int rank) {
  // The folder is fsynced (the rank's files' names made durable) before the
  // marker appears: once it is there the main process may rename the folder
  // away, and an fsync after it found no folder.
  fsync_path(folder);
  FileWriter writer(marker_path(folder, rank));
  writer.finish();
}

void wait_for_rank_markers(const std::string& folder, int world_size, int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int rank = 0; rank < world_size; ++rank) {
    while (!std::filesystem::exists(marker_path(folder, rank))) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw FormatError("'" + folder + "': rank " + std::to_string(rank) + " did not finish writing its files within " +
                              std::to_string(timeout_ms / 1000) + " s; the checkpoint is not committed");
      }
      ::usleep(10000);
    }
  }
  for (int rank = 0; rank < world_size; ++rank) std::filesystem::remove(marker_path(folder, rank));
}

}  // namespace accel::formats
