#include "engine/comm/collective_monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/protocol/error_file.h"
#include "engine/protocol/store_connection.h"

namespace accel {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The publisher waits this long after a publication before the next, so a
// run of fast collectives costs one store write per interval, not one each.
constexpr milliseconds kPublishInterval{100};

std::string seconds_text(milliseconds ms) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", static_cast<double>(ms.count()) / 1000);
  return text;
}

// Whether `other` has reached collective `mine`: it is in it, or past it.
bool arrived(const std::optional<CollectiveState>& other, const CollectiveState& mine) {
  if (!other) return false;
  if (other->seq > mine.seq) return true;
  return other->seq == mine.seq && other->op == mine.op;
}

}  // namespace

CollectiveMonitor::CollectiveMonitor(int rank, int world_size, const StoreAddress& store,
                                     milliseconds timeout, std::string error_file)
    : rank_(rank), world_size_(world_size), timeout_(timeout), error_file_(std::move(error_file)) {
  if (store.port > 0) {
    try {
      store_ = std::make_unique<StoreConnection>(store, Clock::now() + std::chrono::seconds(1));
      // The final wait's connection, made now: a finish must not need a new
      // connection at a time when strangers may crowd the store.
      finisher_ = std::make_unique<StoreConnection>(store, Clock::now() + std::chrono::seconds(1));
    } catch (const StoreUnreachable&) {
      // Reports lose the other ranks' whereabouts; training is unaffected.
      store_.reset();
    }
  }
  thread_ = std::thread([this] { run(); });
}

CollectiveMonitor::~CollectiveMonitor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

int64_t CollectiveMonitor::enter(const std::string& op, const std::string& where,
                                 const std::string& detail) {
  std::lock_guard<std::mutex> lock(mutex_);
  InFlight entry{{next_seq_++, true, op, where, detail}, Clock::now()};
  in_flight_.push_back(std::move(entry));
  dirty_ = true;
  changed_.notify_all();
  return in_flight_.back().state.seq;
}

void CollectiveMonitor::leave(int64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                         [seq](const InFlight& f) { return f.state.seq == seq; });
  if (it == in_flight_.end()) return;
  if (seq > last_left_.seq) {
    last_left_ = it->state;
    last_left_.inside = false;
  }
  in_flight_.erase(it);
  dirty_ = true;
  changed_.notify_all();
}

bool CollectiveMonitor::finish_together() {
  ++finishes_;
  std::vector<std::string> keys;
  for (int rank = 0; rank < world_size_; ++rank) keys.push_back(finished_key(rank, finishes_));
  // Said at once, not at the publisher's next turn: the launcher must see
  // this rank in "finish" before it can tell an abandoned peer.
  if (!publish()) return false;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    if (!store_) return false;
    store_->set(keys[static_cast<size_t>(rank_)], "");
  }
  // On a connection of its own (the publisher keeps the first), made when
  // the monitor was.
  finisher_->wait(keys, std::nullopt);
  return true;
}

bool CollectiveMonitor::publish() {
  std::string value;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    dirty_ = false;
    value = encode_collective_state(current_locked());
  }
  std::lock_guard<std::mutex> lock(store_mutex_);
  if (!store_) return false;
  try {
    store_->set(collective_state_key(rank_), value);
  } catch (const std::exception&) {
    store_.reset();  // the launcher's store is gone; stop publishing
    return false;
  }
  return true;
}

CollectiveState CollectiveMonitor::current_locked() const {
  if (!in_flight_.empty()) return in_flight_.front().state;
  return last_left_;
}

std::vector<std::optional<CollectiveState>> CollectiveMonitor::read_states() {
  std::vector<std::optional<CollectiveState>> states(static_cast<size_t>(world_size_));
  std::lock_guard<std::mutex> lock(store_mutex_);
  if (!store_) return states;
  try {
    for (int rank = 0; rank < world_size_; ++rank) {
      if (auto value = store_->get(collective_state_key(rank))) {
        states[static_cast<size_t>(rank)] = decode_collective_state(*value);
      }
    }
  } catch (const std::exception&) {
    store_.reset();
  }
  return states;
}

std::string CollectiveMonitor::timeout_message(int64_t seq) {
  CollectiveState mine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = std::find_if(in_flight_.begin(), in_flight_.end(),
                           [seq](const InFlight& f) { return f.state.seq == seq; });
    mine = it != in_flight_.end() ? it->state : last_left_;
  }
  std::string text = describe_collective(mine) + " did not complete within " +
                     seconds_text(timeout_) + " (--timeout)";
  bool known;
  {
    std::lock_guard<std::mutex> lock(store_mutex_);
    known = store_ != nullptr;
  }
  if (!known) return text + "; where the other ranks are is unknown (no launcher store)";
  std::vector<std::optional<CollectiveState>> states = read_states();
  std::string missing;
  int count = 0;
  for (int rank = 0; rank < world_size_; ++rank) {
    if (rank == rank_ || arrived(states[static_cast<size_t>(rank)], mine)) continue;
    ++count;
    missing += "\n  rank " + std::to_string(rank) + " " +
               describe_whereabouts(states[static_cast<size_t>(rank)], mine);
  }
  if (count == 0) return text + "; every rank arrived, so the transport itself is stuck or too slow";
  return text + ": " + std::to_string(count) + (count == 1 ? " rank" : " ranks") +
         " did not arrive:" + missing;
}

void CollectiveMonitor::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto watchdog_after = timeout_ + kWatchdogGrace;
  while (!stopping_) {
    // Wake for news, and in time to check the oldest collective's deadline.
    auto wake = Clock::now() + std::chrono::seconds(1);
    if (!in_flight_.empty()) wake = std::min(wake, in_flight_.front().started + watchdog_after);
    changed_.wait_until(lock, wake, [this] { return stopping_ || dirty_; });
    if (stopping_) break;

    if (!in_flight_.empty() && Clock::now() >= in_flight_.front().started + watchdog_after) {
      int64_t seq = in_flight_.front().state.seq;
      lock.unlock();
      std::string message = "accel: " + timeout_message(seq);
      if (error_file_.empty() || !append_error_record(error_file_.c_str(), kFatalRecord, message)) {
        std::fprintf(stderr, "%s\n", message.c_str());
      }
      std::fflush(nullptr);
      // The backend cannot be interrupted; ending the process is what frees
      // the run (and its peers) from the hang.
      ::_exit(1);
    }
    if (!dirty_) continue;
    lock.unlock();
    publish();
    lock.lock();
    changed_.wait_for(lock, kPublishInterval, [this] { return stopping_; });
  }
}

}  // namespace accel
