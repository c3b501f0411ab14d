// A blocking connection to a rendezvous store (StoreServer) for programs
// without LibTorch: the launchers of other nodes, which meet on node 0's
// store, and the worker's collective monitor, which publishes where each
// rank is. Workers' process groups use StoreClient (engine/store_client.h),
// a c10d::Store over the same protocol (engine/launch/store_protocol.h).
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

// The store could not be reached, or the connection broke mid-request.
class StoreUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class StoreConnection {
 public:
  // Connects to host:port, retrying until `deadline` (a node's launcher may
  // start after the others). Throws StoreUnreachable naming host, port and
  // the last reason when no connection is made in time.
  StoreConnection(const std::string& host, uint16_t port,
                  std::chrono::steady_clock::time_point deadline);
  ~StoreConnection();
  StoreConnection(const StoreConnection&) = delete;
  StoreConnection& operator=(const StoreConnection&) = delete;

  void set(const std::string& key, const std::string& value);
  // The value, or nothing when the key does not exist (no waiting).
  std::optional<std::string> get(const std::string& key);
  int64_t add(const std::string& key, int64_t delta);
  // Waits until every key exists or `timeout` passes; returns the keys still
  // missing then (empty: all exist).
  std::vector<std::string> wait(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout);

  // "host:port", for messages.
  std::string where() const;

 private:
  // Sends one request frame and returns the response body, whose status
  // byte is left for the caller. Throws StoreUnreachable on a broken
  // connection and std::runtime_error when the server answers Error.
  std::string request(const std::string& frame, std::optional<int64_t> reply_timeout_ms);

  std::string host_;
  uint16_t port_;
  int fd_ = -1;
};

}  // namespace accel
