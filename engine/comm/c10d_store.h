// A worker's connection to the launcher's rendezvous store (StoreServer), as a
// c10d::Store so that LibTorch's process groups rendezvous over it: an
// adapter over the one client, StoreConnection (engine/protocol/store_connection.h).
// The one file of engine/store/ that needs LibTorch: it is built into
// accel_engine, the rest into the launcher's accel_launch.
#pragma once
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "engine/protocol/store_connection.h"

namespace accel {

class C10dStore : public c10d::Store {
 public:
  // Connects to the address, retrying until `timeout` passes (a remote
  // node's launcher may come up after this worker), and presents its token.
  // `timeout` is also the store timeout for get() and wait(keys); zero means
  // no limit, as in c10d. Throws std::runtime_error naming host:port when no
  // connection is made in time or the token is refused.
  C10dStore(const StoreAddress& address, std::chrono::milliseconds timeout);
  ~C10dStore() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key,
                                  const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  // Blocks until the key exists, up to the store timeout.
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  // Both throw std::runtime_error "... timed out after N ms waiting for keys:
  // k1, k2" naming the keys still missing. A zero timeout waits without limit.
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // A new connection to the same store. Newer LibTorch declares this pure
  // virtual in c10d::Store; no `override`, so one declaration serves all versions.
  c10::intrusive_ptr<c10d::Store> clone();

 private:
  StoreConnection connection_;
  std::mutex mutex_;  // one request at a time on the socket; Gloo calls from many threads
};

}  // namespace accel
