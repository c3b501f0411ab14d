// The one client of the rendezvous store (StoreServer): a blocking
// connection, without LibTorch, for the launchers of other nodes (which meet
// on node 0's store), the worker's collective monitor (which publishes where
// each rank is) and, wrapped as a c10d::Store by C10dStore
// (engine/comm/c10d_store.h), the workers' process groups. The wire format is
// engine/protocol/store_protocol.h.
//
// Not thread-safe: one thread talks on a connection at a time.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace accel {

// Where a store listens and the token it wants (--rdzv-token).
struct StoreAddress {
  std::string host;
  uint16_t port = 0;
  std::string token;

  // "host:port", for messages.
  std::string where() const { return host + ":" + std::to_string(port); }
};

// The store could not be reached, or the connection broke mid-request.
class StoreUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A request got no answer within its deadline.
class StoreNoAnswer : public StoreUnreachable {
 public:
  using StoreUnreachable::StoreUnreachable;
};

class StoreConnection {
 public:
  using Clock = std::chrono::steady_clock;
  // How long a request that does not wait may take to be answered: the store
  // answers at once unless its host is in trouble, which must not hang us.
  static constexpr std::chrono::milliseconds kReplyTimeout{10000};

  // Connects to the address, retrying until `deadline` (nullopt: without
  // limit; a node's launcher may start after the others), and presents the
  // token. Throws StoreUnreachable naming host, port and the last reason
  // when no connection is made in time, and std::runtime_error when the
  // store refuses the token. `reply_timeout` bounds every later request
  // that does not wait (nullopt: no bound).
  StoreConnection(StoreAddress address, std::optional<Clock::time_point> deadline,
                  std::optional<std::chrono::milliseconds> reply_timeout = kReplyTimeout);
  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  void set(const std::string& key, const std::string& value);
  // The value, or nothing when the key does not exist (no waiting).
  std::optional<std::string> get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  // c10d's compare-and-set: the value after the operation.
  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired);
  // Whether the key existed.
  bool remove(const std::string& key);
  // Whether every key exists (no waiting).
  bool check(const std::vector<std::string>& keys);
  int64_t num_keys();
  // Waits until every key exists or `timeout` passes (nullopt: without
  // limit); returns the keys still missing then (empty: all exist).
  std::vector<std::string> wait(const std::vector<std::string>& keys,
                                std::optional<std::chrono::milliseconds> timeout);

  const StoreAddress& address() const { return address_; }

 private:
  // Sends one request frame and returns the response body, whose status
  // byte is left for the caller, waiting for it until `deadline`. Throws
  // StoreUnreachable on a broken connection.
  std::string request(const std::string& frame, std::optional<Clock::time_point> deadline);
  // request() bounded by the reply timeout; an Error answer becomes a
  // std::runtime_error naming the store.
  std::string ask(const std::string& frame);

  StoreAddress address_;
  std::optional<std::chrono::milliseconds> reply_timeout_;
  int fd_ = -1;
};

}  // namespace accel
