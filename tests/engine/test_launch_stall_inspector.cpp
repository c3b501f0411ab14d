// The stall inspector: ranks' published collective states in, reports out
// once a collective has waited past the threshold, naming who waits where
// and where each missing rank is; then again each further threshold, and
// not at all while collectives keep moving. Also the state's encoding.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "engine/protocol/collective_state.h"
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

TEST_CASE("a stale state does not turn the blame on the rank that waits", "[stall]") {
  // Rank 1 was stopped just after all_reduce #6, before it could publish
  // having left it: its state says it is inside #6, long ago. Rank 0 could
  // only have entered #7 after rank 1 took part in #6, so the stall is #7
  // and rank 1 is the one missing from it.
  StallInspector inspector(2, seconds(60));
  auto t0 = StallInspector::Clock::now();
  States early = {left(6, "all_reduce", "r.lua:9"), in(6, "all_reduce", "r.lua:9")};
  CHECK(inspector.observe(early, t0).empty());
  States later = {in(7, "all_reduce", "r.lua:9"), in(6, "all_reduce", "r.lua:9")};
  CHECK(inspector.observe(later, t0 + seconds(30)).empty());
  std::string report = inspector.observe(later, t0 + seconds(90), {1});
  CHECK_THAT(report, Contains("rank 0 has waited 60 s in all_reduce #7"));
  CHECK_THAT(report, Contains("for rank 1, which has not arrived"));
  CHECK_THAT(report, Contains("rank 1 in all_reduce #6 of float32[4] (sum) at r.lua:9 instead (when it "
                              "last said; its process is stopped: SIGSTOP or a debugger)"));

  // All inside one collective, one of them stopped: not the transport's fault.
  StallInspector both(2, seconds(60));
  States same = {in(7, "all_reduce", "r.lua:9"), in(7, "all_reduce", "r.lua:9")};
  CHECK(both.observe(same, t0).empty());
  CHECK_THAT(both.observe(same, t0 + seconds(60), {1}),
             Contains("all arrived, but the process of rank 1 is stopped"));
}

TEST_CASE("a rank that finished while another waits in a collective it never entered",
          "[stall]") {
  CollectiveState finish{7, true, "finish", "", ""};
  // Rank 1 finished after 6 collectives; rank 0 waits in its 7th.
  auto message = StallInspector::abandoned({in(7, "all_reduce", "r.lua:9"), finish});
  REQUIRE(message);
  CHECK(*message == "rank 1 finished its recipe while rank 0 waits in all_reduce #7 of float32[4] "
                    "(sum) at r.lua:9, which rank 1 never entered");
  // Rank 0 still shown in #6, which rank 1 took part in: it is merely behind.
  CHECK_FALSE(StallInspector::abandoned({in(6, "all_reduce", "r.lua:9"), finish}));
  // Both finishing; nobody inside anything; nobody published.
  CHECK_FALSE(StallInspector::abandoned({finish, finish}));
  CHECK_FALSE(StallInspector::abandoned({left(6, "all_reduce", "r.lua:9"), finish}));
  CHECK_FALSE(StallInspector::abandoned({std::nullopt, finish}));
  CHECK(accel::describe_whereabouts(finish, in(7, "all_reduce", "r.lua:9")) == "has finished its recipe");
}
