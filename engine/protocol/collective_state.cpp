#include "engine/protocol/collective_state.h"

#include <charconv>
#include <vector>

namespace accel {
namespace {

// Fields are separated by a byte that file names and shapes do not hold.
constexpr char kSeparator = '\x1f';

}  // namespace

std::string collective_state_key(int rank) { return "accel/collective/" + std::to_string(rank); }

std::string finished_key(int rank, int64_t run) {
  return "accel/finished/" + std::to_string(rank) + "/" + std::to_string(run);
}

std::string encode_collective_state(const CollectiveState& state) {
  std::string text = std::to_string(state.seq);
  for (const std::string* field : {&state.op, &state.where, &state.detail}) {
    text += kSeparator;
    text += *field;
  }
  text += kSeparator;
  text += state.inside ? "in" : "out";
  return text;
}

std::optional<CollectiveState> decode_collective_state(std::string_view text) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    size_t end = text.find(kSeparator, start);
    fields.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  if (fields.size() != 5) return std::nullopt;
  CollectiveState state;
  auto [stop, error] = std::from_chars(fields[0].data(), fields[0].data() + fields[0].size(), state.seq);
  if (error != std::errc() || stop != fields[0].data() + fields[0].size()) return std::nullopt;
  if (fields[4] != "in" && fields[4] != "out") return std::nullopt;
  state.op = fields[1];
  state.where = fields[2];
  state.detail = fields[3];
  state.inside = fields[4] == "in";
  return state;
}

std::string describe_collective(const CollectiveState& state) {
  std::string text = state.op + " #" + std::to_string(state.seq);
  if (!state.detail.empty()) text += " of " + state.detail;
  if (!state.where.empty()) text += " at " + state.where;
  return text;
}

std::string describe_whereabouts(const std::optional<CollectiveState>& state,
                                 const CollectiveState& waited) {
  if (!state || state->seq == 0) return "has entered no collective yet";
  if (state->inside && state->op == "finish") return "has finished its recipe";
  if (state->inside) {
    bool same = state->seq == waited.seq && state->op == waited.op;
    return "in " + describe_collective(*state) + (same ? "" : " instead");
  }
  return "outside any collective since it left " + describe_collective(*state);
}

}  // namespace accel
