#include "engine/launch/node_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <map>
#include <vector>

namespace accel {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// How long node 0's store may stay unreachable while workers run before the
// other launchers take it that node 0's launcher has ended.
constexpr std::chrono::seconds kStoreLossGrace{10};
// How long publish_failure() may spend on a store that went away.
constexpr milliseconds kPublishTimeout{2000};
// How often node 0's depart() looks for a published failure while it waits.
constexpr milliseconds kDepartTurn{200};

std::string this_host() {
  char name[HOST_NAME_MAX + 1] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

std::string node_list(const std::vector<int>& nodes) {
  std::string text = nodes.size() == 1 ? "node " : "nodes ";
  for (size_t i = 0; i < nodes.size(); ++i) text += (i ? ", " : "") + std::to_string(nodes[i]);
  return text;
}

// "HOST:PID nproc=N" as a node registers itself.
struct Registration {
  std::string identity;
  int nproc = 0;
};

Registration parse_registration(const std::string& value) {
  Registration r;
  size_t space = value.rfind(" nproc=");
  r.identity = value.substr(0, space);
  if (space != std::string::npos) r.nproc = std::atoi(value.c_str() + space + 7);
  return r;
}

}  // namespace

NodeRendezvous::NodeRendezvous(StoreAddress store, int round, int node_rank, int nnodes)
    : store_address_(std::move(store)),
      round_(round),
      node_rank_(node_rank),
      nnodes_(nnodes),
      identity_(this_host() + ":" + std::to_string(::getpid())) {}

std::string NodeRendezvous::key(const std::string& name) const {
  return "rdzv/" + std::to_string(round_) + "/" + name;
}

void NodeRendezvous::connect(Clock::time_point deadline) {
  store_.reset();
  store_ = std::make_unique<StoreConnection>(store_address_, deadline);
}

void NodeRendezvous::meet(int nproc, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> keys;
  for (int node = 0; node < nnodes_; ++node) keys.push_back(key("node/" + std::to_string(node)));
  const std::string mine = keys[static_cast<size_t>(node_rank_)];
  const std::string registration = identity_ + " nproc=" + std::to_string(nproc);

  std::vector<std::string> missing = keys;
  while (!missing.empty()) {
    if (Clock::now() >= deadline) break;
    try {
      if (!store_) connect(deadline);
      store_->set(mine, registration);
      auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      missing = store_->wait(keys, std::max(left, milliseconds(1)));
    } catch (const StoreUnreachable& e) {
      // Node 0 not up yet, or replacing its store for this round: try again.
      store_.reset();
      if (Clock::now() >= deadline) {
        throw RendezvousError("node " + std::to_string(node_rank_) + " could not reach node 0 in " +
                              std::to_string(timeout.count() / 1000) + " s: " + e.what());
      }
    }
  }
  if (!missing.empty()) {
    std::vector<int> nodes;
    for (const std::string& k : missing) nodes.push_back(std::atoi(k.c_str() + k.rfind('/') + 1));
    throw RendezvousError("the nodes did not all arrive within " +
                          std::to_string(timeout.count() / 1000) + " s at the store on " +
                          store_address_.where() + ": " + node_list(nodes) +
                          " did not (expected " + std::to_string(nnodes_) + " nodes)");
  }

  std::map<int, std::vector<int>> by_nproc;  // nproc -> nodes
  for (int node = 0; node < nnodes_; ++node) {
    Registration r = parse_registration(store_->get(keys[static_cast<size_t>(node)]).value_or(""));
    if (node == node_rank_ && r.identity != identity_) {
      throw RendezvousError("two launchers claim node rank " + std::to_string(node_rank_) +
                            ": this one (" + identity_ + ") and " + r.identity +
                            "; give each machine its own --node-rank");
    }
    by_nproc[r.nproc].push_back(node);
  }
  if (by_nproc.size() > 1) {
    std::string counts;
    for (const auto& [n, nodes] : by_nproc) {
      counts += (counts.empty() ? "" : ", ") + node_list(nodes) + " " + std::to_string(n);
    }
    throw RendezvousError("every node must run the same number of processes (--nproc), but " +
                          counts);
  }
}

std::optional<std::string> NodeRendezvous::news() {
  try {
    if (!store_) connect(Clock::now() + milliseconds(200));
    std::optional<std::string> failure = store_->get(key("failed"));
    lost_since_.reset();
    if (failure && !published_) return failure;
  } catch (const std::exception&) {
    store_.reset();
    if (!lost_since_) lost_since_ = Clock::now();
    if (node_rank_ != 0 && Clock::now() - *lost_since_ >= kStoreLossGrace) {
      return "node 0's launcher ended (its store on " + store_address_.where() +
             " has been gone for " + std::to_string(kStoreLossGrace.count()) + " s)";
    }
  }
  return std::nullopt;
}

std::vector<int> NodeRendezvous::depart(bool succeeded, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> waiting;
  try {
    if (!store_) connect(Clock::now() + kPublishTimeout);
    store_->set(key("done/" + std::to_string(node_rank_)), "");
    if (node_rank_ != 0 || !succeeded) return {};
    for (int node = 1; node < nnodes_; ++node) waiting.push_back(key("done/" + std::to_string(node)));
    while (!waiting.empty() && Clock::now() < deadline) {
      if (store_->get(key("failed"))) return {};
      const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
      waiting = store_->wait(waiting, std::clamp(left, milliseconds(1), kDepartTurn));
    }
  } catch (const std::exception&) {
    // Node 0 is gone, or its own store failed: nobody is left to wait for.
    return {};
  }
  std::vector<int> missing;
  for (const std::string& k : waiting) missing.push_back(std::atoi(k.c_str() + k.rfind('/') + 1));
  return missing;
}

void NodeRendezvous::publish_failure(const std::string& what) {
  if (published_) return;
  published_ = true;
  try {
    if (!store_) connect(Clock::now() + kPublishTimeout);
    store_->set(key("failed"), "node " + std::to_string(node_rank_) + " failed (" + what + ")");
  } catch (const std::exception&) {
    // Node 0 is gone: its workers, and so the others, are failing anyway.
  }
}

}  // namespace accel
