#include "engine/launch/stall_inspector.h"

#include <algorithm>
#include <sstream>

#include "engine/protocol/rank_list.h"

namespace accel {
namespace {

bool waits_in(const std::optional<CollectiveState>& state, const CollectiveState& stalled) {
  return state && state->inside && state->seq == stalled.seq && state->op == stalled.op;
}

bool finished(const std::optional<CollectiveState>& state) {
  return state && state->inside && state->op == "finish";
}

}  // namespace

StallInspector::StallInspector(int world_size, std::chrono::milliseconds threshold)
    : threshold_(threshold), seen_(static_cast<size_t>(world_size)) {}

std::optional<std::string> StallInspector::abandoned(const std::vector<std::optional<CollectiveState>>& states,
                                                     const std::vector<int>& idle) {
  for (size_t done = 0; done < states.size(); ++done) {
    const bool chunk_done = std::find(idle.begin(), idle.end(), static_cast<int>(done)) != idle.end() &&
                            !(states[done] && states[done]->inside);
    if (!finished(states[done]) && !chunk_done) continue;
    // A finish is the rank's collective number seq: it entered every one
    // before. An idle rank left its last collective, seq (0 before any).
    const int64_t first_never_entered = chunk_done ? (states[done] ? states[done]->seq + 1 : 1) : states[done]->seq;
    std::vector<int> left;
    std::optional<CollectiveState> where;
    for (size_t rank = 0; rank < states.size(); ++rank) {
      const auto& s = states[rank];
      if (!s || !s->inside || finished(s) || s->seq < first_never_entered) continue;
      left.push_back(static_cast<int>(rank));
      if (!where) where = *s;
    }
    if (left.empty()) continue;
    return "rank " + std::to_string(done) + " finished its " + (chunk_done ? "chunk" : "recipe") + " while " +
           rank_list(left) +
           (left.size() == 1 ? " waits" : " wait") + " in " + describe_collective(*where) +
           ", which rank " + std::to_string(done) + " never entered";
  }
  return std::nullopt;
}

std::string StallInspector::observe(const std::vector<std::optional<CollectiveState>>& states,
                                    Clock::time_point now, const std::vector<int>& stopped) {
  for (size_t rank = 0; rank < seen_.size() && rank < states.size(); ++rank) {
    if (seen_[rank].state != states[rank] || seen_[rank].since == Clock::time_point{}) {
      seen_[rank] = {states[rank], now};
    }
  }
  // The latest collective anyone waits in; of the ranks in it, the one
  // that has waited longest.
  std::optional<size_t> longest;
  for (size_t rank = 0; rank < seen_.size(); ++rank) {
    const Seen& s = seen_[rank];
    if (!s.state || !s.state->inside) continue;
    if (!longest) {
      longest = rank;
      continue;
    }
    const Seen& best = seen_[*longest];
    if (s.state->seq > best.state->seq || (s.state->seq == best.state->seq && s.since < best.since))
      longest = rank;
  }
  if (!longest || now - seen_[*longest].since < threshold_) {
    reported_.reset();
    return "";
  }
  const CollectiveState& stalled = *seen_[*longest].state;
  if (reported_ && reported_->seq == stalled.seq && reported_->op == stalled.op &&
      now - reported_at_ < threshold_) {
    return "";
  }
  reported_ = stalled;
  reported_at_ = now;

  std::vector<int> waiting, missing;
  for (size_t rank = 0; rank < seen_.size(); ++rank) {
    (waits_in(seen_[rank].state, stalled) ? waiting : missing).push_back(static_cast<int>(rank));
  }
  auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - seen_[*longest].since);
  std::ostringstream out;
  if (missing.empty()) {
    out << "accel-run: stall: every rank has waited " << waited.count() << " s in "
        << describe_collective(stalled);
    if (stopped.empty()) {
      out << "; all arrived, so the transport itself is stuck or very slow\n";
    } else {
      out << "; all arrived, but the process of " << rank_list(stopped)
          << " is stopped (SIGSTOP or a debugger)\n";
    }
    return out.str();
  }
  out << "accel-run: stall: " << rank_list(waiting) << (waiting.size() == 1 ? " has" : " have")
      << " waited " << waited.count() << " s in " << describe_collective(stalled) << " for "
      << rank_list(missing) << (missing.size() == 1 ? ", which has" : ", which have")
      << " not arrived:\n";
  for (int rank : missing) {
    out << "accel-run:   rank " << rank << ' '
        << describe_whereabouts(seen_[static_cast<size_t>(rank)].state, stalled);
    if (std::find(stopped.begin(), stopped.end(), rank) != stopped.end()) {
      out << " (when it last said; its process is stopped: SIGSTOP or a debugger)";
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace accel
