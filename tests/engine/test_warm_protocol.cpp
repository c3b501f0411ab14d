// The messages between `accel-run --watch` and its warm workers: whatever
// way the bytes are split on the socket, the launcher reads back the same
// messages, error text included, and refuses bytes that are none.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "engine/launch/warm_protocol.h"

using accel::WarmMessage;
using accel::WarmMessageReader;

TEST_CASE("warm messages survive any split of their bytes") {
  WarmMessage failed{WarmMessage::Kind::failed, 7, "train.lua:3: boom\nstack traceback:\n\t[C]: in ?"};
  const std::string bytes = accel::encode_warm_message({WarmMessage::Kind::ready, 0, ""}) +
                            accel::encode_warm_message({WarmMessage::Kind::ok, 12, ""}) +
                            accel::encode_warm_message(failed);
  for (size_t step = 1; step <= bytes.size(); ++step) {
    WarmMessageReader reader;
    std::vector<WarmMessage> got;
    for (size_t at = 0; at < bytes.size(); at += step) {
      reader.feed(bytes.data() + at, std::min(step, bytes.size() - at));
      while (auto message = reader.next()) got.push_back(*message);
    }
    REQUIRE(got.size() == 3);
    CHECK(got[0].kind == WarmMessage::Kind::ready);
    CHECK(got[1].kind == WarmMessage::Kind::ok);
    CHECK(got[1].collectives == 12);
    CHECK(got[2].kind == WarmMessage::Kind::failed);
    CHECK(got[2].collectives == 7);
    CHECK(got[2].error == failed.error);
  }
}

TEST_CASE("bytes that are no warm message are refused, quoted") {
  WarmMessageReader reader;
  reader.feed("hello 3\n", 8);
  CHECK_THROWS_WITH(reader.next(), Catch::Contains("unexpected message from a worker: 'hello 3'"));
}
