// How the launchers of several nodes meet, as torchrun's agents do: node 0's
// launcher hosts the store (a fresh one for every start of the workers, so
// keys of an earlier round cannot confuse a new one); every launcher, node
// 0's included, registers "rdzv/<round>/node/<k>" there and waits until all
// nodes have, then starts its workers. While they run, a launcher whose
// workers failed publishes "rdzv/<round>/failed", so the others stop theirs
// at once rather than wait for a collective to notice. When they end, each
// launcher registers "rdzv/<round>/done/<k>", and node 0's keeps its store
// until every node has (depart).
#pragma once
#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/protocol/store_connection.h"

namespace accel {

// The nodes did not meet: the message names the nodes missing, or the
// conflict (one node rank claimed twice, nodes running different numbers
// of processes).
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NodeRendezvous {
 public:
  NodeRendezvous(StoreAddress store, int round, int node_rank, int nnodes);

  // Registers this node (running `nproc` workers) and waits until every node
  // has, reconnecting when the store goes away meanwhile (node 0 replacing
  // it for a new round). Throws RendezvousError when `timeout` passes first.
  void meet(int nproc, std::chrono::milliseconds timeout);

  // Another node's failure, once one was published: "node 1 failed (rank 3
  // ...)"; or that node 0's store has been gone for a while, which means its
  // launcher ended. Nothing otherwise. Never throws: a store that cannot be
  // reached is news only when it stays so.
  std::optional<std::string> news();

  // Tells the other nodes that this one's workers failed.
  void publish_failure(const std::string& what);

  // After this node's workers ended: says so. Node 0, whose launcher hosts
  // the store, then waits until every other node has said so too, one has
  // failed, or `timeout` has passed: each rank's last request (its final
  // wait for the others) must find the store still there, and node 0's
  // ranks may be released before another node's last rank has asked.
  // Returns the nodes that did not say so in time; never throws.
  std::vector<int> depart(bool succeeded, std::chrono::milliseconds timeout);

 private:
  std::string key(const std::string& name) const;
  void connect(std::chrono::steady_clock::time_point deadline);

  StoreAddress store_address_;
  int round_;
  int node_rank_;
  int nnodes_;
  std::string identity_;  // tells this launcher's registration from another's
  std::unique_ptr<StoreConnection> store_;
  std::optional<std::chrono::steady_clock::time_point> lost_since_;
  bool published_ = false;
};

}  // namespace accel
