// The stall inspector: ranks' published collective states in, reports out
// once a collective has waited past the threshold, naming who waits where
// and where each missing rank is; then again each further threshold, and
// not at all while collectives keep moving. Also the state's encoding.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/launch/collective_state.h"
#include "engine/launch/stall_inspector.h"

namespace {

using accel::CollectiveState;
using accel::StallInspector;
using Catch::Matchers::Contains;
using std::chrono::milliseconds;
using std::chrono::seconds;
using States = std::vector<std::optional<CollectiveState>>;

CollectiveState in(int64_t seq, const std::string& op, const std::string& where) {
  return CollectiveState{seq, true, op, where, "float32[4] (sum)"};
}

CollectiveState left(int64_t seq, const std::string& op, const std::string& where) {
  return CollectiveState{seq, false, op, where, ""};
}

}  // namespace

TEST_CASE("collective states survive encoding", "[stall]") {
  CollectiveState state{42, true, "all_reduce", "recipe.lua:30", "float32[64, 16] (mean)"};
  auto back = accel::decode_collective_state(accel::encode_collective_state(state));
  REQUIRE(back);
  CHECK(*back == state);
  CHECK_FALSE(accel::decode_collective_state("garbage"));
  CHECK(accel::collective_state_key(3) == "accel/collective/3");
  CHECK(accel::describe_collective(state) == "all_reduce #42 of float32[64, 16] (mean) at recipe.lua:30");
}

TEST_CASE("a stall is reported once past the threshold, naming waiting and missing ranks",
          "[stall]") {
  StallInspector inspector(4, seconds(60));
  auto t0 = StallInspector::Clock::now();
  States states = {in(42, "all_reduce", "r.lua:30"), left(41, "broadcast", "r.lua:20"),
                   in(42, "all_reduce", "r.lua:30"), in(42, "barrier", "r.lua:50")};
  CHECK(inspector.observe(states, t0).empty());
  CHECK(inspector.observe(states, t0 + seconds(59)).empty());
  std::string report = inspector.observe(states, t0 + seconds(60));
  CHECK_THAT(report, Contains("accel-run: stall: ranks 0, 2 have waited 60 s in all_reduce #42 "
                              "of float32[4] (sum) at r.lua:30 for ranks 1, 3, which have not arrived:"));
  CHECK_THAT(report, Contains("rank 1 outside any collective since it left broadcast #41 at r.lua:20"));
  CHECK_THAT(report, Contains("rank 3 in barrier #42 of float32[4] (sum) at r.lua:50 instead"));
  // Said once per threshold while it lasts.
  CHECK(inspector.observe(states, t0 + seconds(90)).empty());
  CHECK_THAT(inspector.observe(states, t0 + seconds(121)), Contains("waited 121 s"));
}

TEST_CASE("moving collectives never count as a stall", "[stall]") {
  StallInspector inspector(2, seconds(10));
  auto t = StallInspector::Clock::now();
  for (int64_t seq = 1; seq < 100; ++seq) {
    t += seconds(1);
    CHECK(inspector.observe({in(seq, "all_reduce", "r.lua:9"), in(seq, "all_reduce", "r.lua:9")}, t)
              .empty());
  }
}

TEST_CASE("a rank that never published is named as such; all arrived means the transport",
          "[stall]") {
  StallInspector inspector(2, milliseconds(1000));
  auto t0 = StallInspector::Clock::now();
  States one_missing = {in(1, "init", ""), std::nullopt};
  inspector.observe(one_missing, t0);
  std::string report = inspector.observe(one_missing, t0 + seconds(2));
  CHECK_THAT(report, Contains("rank 0 has waited 2 s in init #1"));
  CHECK_THAT(report, Contains("rank 1 has entered no collective yet"));

  StallInspector all(2, milliseconds(1000));
  States both = {in(5, "barrier", "r.lua:1"), in(5, "barrier", "r.lua:1")};
  all.observe(both, t0);
  CHECK_THAT(all.observe(both, t0 + seconds(3)), Contains("every rank has waited 3 s in barrier #5"));
}
