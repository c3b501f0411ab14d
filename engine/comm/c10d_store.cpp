#include "engine/comm/c10d_store.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace accel {
namespace {

using Clock = StoreConnection::Clock;
using std::chrono::milliseconds;

std::string as_string(const std::vector<uint8_t>& v) { return std::string(v.begin(), v.end()); }
std::vector<uint8_t> as_bytes(const std::string& s) { return {s.begin(), s.end()}; }

// c10d's "no timeout" (zero) as StoreConnection says it.
std::optional<milliseconds> limit_of(milliseconds timeout) {
  if (timeout == c10d::Store::kNoTimeout) return std::nullopt;
  return timeout;
}

std::optional<Clock::time_point> deadline_of(milliseconds timeout) {
  if (timeout == c10d::Store::kNoTimeout) return std::nullopt;
  return Clock::now() + timeout;
}

std::runtime_error timed_out(const std::string& where, milliseconds timeout,
                             const std::vector<std::string>& keys) {
  std::string names;
  for (const auto& k : keys) names += (names.empty() ? "" : ", ") + k;
  return std::runtime_error("rendezvous store at " + where + ": timed out after " +
                            std::to_string(timeout.count()) + " ms waiting for keys: " + names);
}

}  // namespace

// Requests that do not wait are bounded by the store timeout too: the
// store answers them at once unless its host is in trouble.
C10dStore::C10dStore(const StoreAddress& address, milliseconds timeout)
    : c10d::Store(timeout), connection_(address, deadline_of(timeout), limit_of(timeout)) {}

C10dStore::~C10dStore() = default;

void C10dStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  connection_.set(key, as_string(value));
}

std::vector<uint8_t> C10dStore::compareSet(const std::string& key,
                                             const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  std::lock_guard<std::mutex> lock(mutex_);
  return as_bytes(connection_.compare_set(key, as_string(expected), as_string(desired)));
}

std::vector<uint8_t> C10dStore::get(const std::string& key) {
  const auto deadline = deadline_of(timeout_);
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    std::optional<milliseconds> left;
    if (deadline) {
      left = std::max(std::chrono::ceil<milliseconds>(*deadline - Clock::now()), milliseconds(1));
    }
    const auto absent = connection_.wait({key}, left);
    if (!absent.empty()) throw timed_out(connection_.address().where(), timeout_, absent);
    // Nothing: deleted between the wait and the get; wait for it again.
    if (auto value = connection_.get(key)) return as_bytes(*value);
  }
}

int64_t C10dStore::add(const std::string& key, int64_t value) {
  std::lock_guard<std::mutex> lock(mutex_);
  return connection_.add(key, value);
}

bool C10dStore::deleteKey(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  return connection_.remove(key);
}

bool C10dStore::check(const std::vector<std::string>& keys) {
  std::lock_guard<std::mutex> lock(mutex_);
  return connection_.check(keys);
}

int64_t C10dStore::getNumKeys() {
  std::lock_guard<std::mutex> lock(mutex_);
  return connection_.num_keys();
}

void C10dStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void C10dStore::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto absent = connection_.wait(keys, limit_of(timeout));
  if (!absent.empty()) throw timed_out(connection_.address().where(), timeout, absent);
}

c10::intrusive_ptr<c10d::Store> C10dStore::clone() {
  return c10::make_intrusive<C10dStore>(connection_.address(), timeout_);
}

}  // namespace accel
