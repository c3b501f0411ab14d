// The rendezvous key-value store the launcher hosts for its workers.
//
// The launcher binds the port before it spawns anyone (port 0 picks a free
// one), so two runs started at once never race for a port. Workers reach it
// through C10dStore (engine/comm/c10d_store.h), a c10d::Store, so Gloo's
// rendezvous runs over it. No LibTorch here: the launcher must stay small.
//
// It may listen beyond loopback, so it trusts no peer: only connections that
// present the run's token may use it (engine/protocol/store_protocol.h), and
// what any one peer can make it hold is bounded (StoreLimits).
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace accel {

struct StoreLimits {
  // Open connections, authenticated or not. Beyond it (or beyond the
  // process's descriptor limit) the store stops accepting until one closes;
  // peers wait in the listen backlog rather than being refused.
  size_t max_connections = 4096;
  // Connections that have not yet presented the token, from one peer
  // address and from all together. The store never stops accepting for
  // them: at either cap it closes the oldest such stranger, so a crowd of
  // idle connections (refilled as fast as they are dropped) cannot keep
  // the run's own ranks out; each stranger is also dropped after
  // hello_timeout.
  size_t max_unauthenticated_per_address = 64;
  size_t max_unauthenticated = 1024;
  std::chrono::milliseconds hello_timeout{10000};
  // Keys and values held, all together.
  size_t max_stored_bytes = size_t{256} << 20;
};

class StoreServer {
 public:
  // Binds host:port and serves, on a background thread until destroyed, the
  // connections that present `token` (not empty). Throws std::runtime_error
  // naming host and port when binding fails.
  StoreServer(const std::string& host, uint16_t port, std::string token, StoreLimits limits = {});
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  uint16_t port() const;

  // The current value of a key, for the launcher's own reports.
  std::optional<std::string> peek(const std::string& key) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace accel
