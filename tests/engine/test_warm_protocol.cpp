// The frames between `accel-run --watch` / `accel-run repl` / `accel-run
// serve` and their warm workers (and a serve's submitters): whatever way the bytes are split on the socket, each side reads
// back the same commands and messages, text included, and refuses bytes
// that are none.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/protocol/warm_protocol.h"

using accel::WarmCommand;
using accel::WarmFrameReader;
using accel::WarmMessage;

TEST_CASE("worker messages survive any split of their bytes") {
  const WarmMessage failed{WarmMessage::Kind::failed, 7, "train.lua:3: boom\nstack traceback:\n\t[C]: in ?"};
  const std::string bytes = accel::encode_warm_message({WarmMessage::Kind::ready, 4242, ""}) +
                            accel::encode_warm_message({WarmMessage::Kind::ok, 12, "3\ttensor"}) +
                            accel::encode_warm_message({WarmMessage::Kind::more, 0, ""}) +
                            accel::encode_warm_message(failed);
  for (size_t step = 1; step <= bytes.size(); ++step) {
    WarmFrameReader reader;
    std::vector<WarmMessage> got;
    for (size_t at = 0; at < bytes.size(); at += step) {
      reader.feed(bytes.data() + at, std::min(step, bytes.size() - at));
      while (auto message = reader.next_message()) got.push_back(*message);
    }
    REQUIRE(got.size() == 4);
    CHECK(got[0].kind == WarmMessage::Kind::ready);
    CHECK(got[0].number == 4242);
    CHECK(got[1].kind == WarmMessage::Kind::ok);
    CHECK(got[1].number == 12);
    CHECK(got[1].text == "3\ttensor");
    CHECK(got[2].kind == WarmMessage::Kind::more);
    CHECK(got[3].kind == WarmMessage::Kind::failed);
    CHECK(got[3].number == 7);
    CHECK(got[3].text == failed.text);
  }
}

TEST_CASE("launcher commands carry their text whole") {
  const std::string chunk = "for i = 1, 3 do\n  print(i)\nend";
  WarmFrameReader reader;
  const std::string bytes = accel::encode_warm_command({"run", ""}) + accel::encode_warm_command({"chunk", chunk});
  reader.feed(bytes.data(), bytes.size());
  std::optional<WarmCommand> run = reader.next_command();
  REQUIRE(run);
  CHECK(run->word == "run");
  std::optional<WarmCommand> got = reader.next_command();
  REQUIRE(got);
  CHECK(got->word == "chunk");
  CHECK(got->text == chunk);
  CHECK_FALSE(reader.next_command());
}

TEST_CASE("bytes that are no frame are refused, quoted") {
  WarmFrameReader reader;
  reader.feed("hello 3 x\n", 10);
  CHECK_THROWS_WITH(reader.next_message(), Catch::Contains("unexpected bytes on a warm worker's socket: 'hello 3 x'"));
  WarmFrameReader commands;
  commands.feed("launch 0\n", 9);
  CHECK_THROWS_WITH(commands.next_command(), Catch::Contains("'launch'"));
}

TEST_CASE("a served run's request carries its folder, recipe and arguments, empty ones too") {
  const accel::RunRequest request{"/home/me/sweep", "lora trial.lua", {"--r", "", "a b", "x\ny"}};
  const std::string text = accel::encode_run_request(request);
  WarmFrameReader reader;
  const std::string bytes = accel::encode_warm_command({"submit", text});
  reader.feed(bytes.data(), bytes.size());
  const auto command = reader.next_command();
  REQUIRE(command);
  CHECK(command->word == "submit");
  const accel::RunRequest back = accel::decode_run_request(command->text);
  CHECK(back.cwd == request.cwd);
  CHECK(back.recipe == request.recipe);
  CHECK(back.args == request.args);
  CHECK(accel::decode_run_request(accel::encode_run_request({"/f", "r.lua", {}})).args.empty());
  CHECK_THROWS_AS(accel::decode_run_request(""), std::runtime_error);
  CHECK_THROWS_AS(accel::decode_run_request(std::string("/f\0", 3)), std::runtime_error);
}
