// The rendezvous key-value store the launcher hosts for its workers.
//
// The launcher binds the port before it spawns anyone (port 0 picks a free
// one), so two runs started at once never race for a port. Workers reach it
// through StoreClient (engine/store_client.h), a c10d::Store, so Gloo's
// rendezvous runs over it. No LibTorch here: the launcher must stay small.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace accel {

class StoreServer {
 public:
  // Binds host:port and serves on a background thread until destroyed.
  // Throws std::runtime_error naming host and port when binding fails.
  StoreServer(const std::string& host, uint16_t port);
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
