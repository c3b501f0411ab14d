// The trackers' pieces alone: TensorBoard's record framing against values
// TensorBoard's own masked_crc32c gives, the protobuf encoding against the
// examples of protobuf's encoding guide and Python's protobuf,
// metrics.jsonl lines, buffering until the interval or flush, the UTF-8
// checks on names, and the quoting that keeps names from files out of
// gnuplot's code.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "engine/launch/gnuplot_script.h"
#include "engine/tracking/jsonl_tracker.h"
#include "engine/tracking/protobuf_wire.h"
#include "engine/tracking/record_framing.h"
#include "tests/engine/scratch_files.h"

using namespace accel;
using accel::testing::slurp;
using accel::testing::TempDir;

TEST_CASE("masked CRC-32C matches TensorBoard's") {
  // tensorboard.compat.tensorflow_stub.pywrap_tensorflow.masked_crc32c
  CHECK(tracking::masked_crc32c("123456789") == 0xc78ab0e5u);
  CHECK(tracking::masked_crc32c("") == 0xa282ead8u);
}

TEST_CASE("a record is length, its CRC, the data, its CRC") {
  std::string out = "x";
  tracking::append_record(out, "123456789");
  REQUIRE(out.size() == 1 + 8 + 4 + 9 + 4);
  uint64_t length = 0;
  uint32_t length_crc = 0, data_crc = 0;
  std::memcpy(&length, out.data() + 1, 8);
  std::memcpy(&length_crc, out.data() + 9, 4);
  std::memcpy(&data_crc, out.data() + 22, 4);
  CHECK(length == 9);
  CHECK(length_crc == 0x3971f937u);  // TensorBoard's masked_crc32c(struct.pack("<Q", 9))
  CHECK(out.substr(13, 9) == "123456789");
  CHECK(data_crc == 0xc78ab0e5u);
}

TEST_CASE("protobuf wire format: the encoding guide's examples") {
  using tracking::ProtoWriter;
  auto hex = [](const std::string& bytes) {
    std::string out;
    char two[3];
    for (unsigned char c : bytes) {
      std::snprintf(two, sizeof two, "%02x", c);
      out += two;
    }
    return out;
  };
  ProtoWriter a;
  a.varint(1, 150);  // message Test1 { int32 a = 1; } with a = 150
  CHECK(hex(a.data()) == "089601");
  ProtoWriter b;
  b.bytes(2, "testing");  // message Test2 { string b = 2; }
  CHECK(hex(b.data()) == "120774657374696e67");
  ProtoWriter c;
  c.message(3, a);  // message Test3 { Test1 c = 3; }
  CHECK(hex(c.data()) == "1a03089601");
  // Negative int64s take ten bytes; fixed-width numbers are little-endian.
  // The bytes are Python protobuf's for TensorBoard's Event(wall_time=1.5,
  // step=-1), Summary.Value(simple_value=0.25) and, after it, struct.proto's
  // Value(bool_value=True).
  ProtoWriter d;
  d.float64(1, 1.5);
  d.int64(2, -1);
  CHECK(hex(d.data()) == "09000000000000f83f10ffffffffffffffffff01");
  ProtoWriter e;
  e.float32(2, 0.25f);
  e.boolean(4, true);
  CHECK(hex(e.data()) == "150000803e2001");
  e.clear();
  CHECK(e.data().empty());
}

TEST_CASE("metrics.jsonl: one object per call, buffered until flush") {
  TempDir dir;
  const std::string run = dir.path + "/a/run";
  tracking::JsonlTracker tracker(run, 3600);
  tracker.log(3, {{"loss", 0.1}, {"q\"uote", -2.5e-7}, {"nan", std::nan("")}, {"inf", -INFINITY}});
  CHECK(slurp(run + "/metrics.jsonl").empty());  // the interval has not passed
  tracker.flush();
  const std::string line = slurp(run + "/metrics.jsonl");
  REQUIRE(line.rfind("{\"step\": 3, \"time\": ", 0) == 0);
  CHECK(line.find(", \"loss\": 0.1, \"q\\\"uote\": -2.5e-07, \"nan\": \"NaN\", \"inf\": \"-Infinity\"}\n") !=
        std::string::npos);
  tracker.log_config({{"lr", 0.001}, {"amp", false}, {"name", std::string("a\nb")}});
  CHECK(slurp(run + "/config.json") == "{\n  \"lr\": 0.001,\n  \"amp\": false,\n  \"name\": \"a\\u000ab\"\n}\n");
  CHECK_THROWS_WITH(tracker.log(1, {{"step", 1}}), Catch::Contains("metric name 'step'"));
  CHECK_THROWS_WITH(tracker.log(1, {{"", 1}}), "metric name is empty");
  CHECK_THROWS_WITH(tracker.log(1, {{"a\xff", 1}}), "metric name 'a\\xff' is not valid UTF-8");
  tracker.close(tracking::RunOutcome::success);
  CHECK_THROWS_WITH(tracker.log(4, {{"loss", 1}}), Catch::Contains("is closed"));
}

TEST_CASE("a buffered file flushes once its interval has passed") {
  TempDir dir;
  tracking::BufferedFile file(dir.path + "/f", 0);
  file.append("now");
  CHECK(slurp(dir.path + "/f") == "now");
}

TEST_CASE("names reach gnuplot as single-quoted text, split at their quotes") {
  CHECK(plot::gnuplot_string("loss") == "('loss')");
  CHECK(plot::gnuplot_string("it's") == "('it' . sprintf('%c', 39) . 's')");
  // A name starting with a quote, or holding a doubled one, which gnuplot 5.4 read past.
  CHECK(plot::gnuplot_string("'a''") ==
        "('' . sprintf('%c', 39) . 'a' . sprintf('%c', 39) . '' . sprintf('%c', 39) . '')");
  CHECK(plot::gnuplot_string("a\nsystem('x')") ==
        "('a?system(' . sprintf('%c', 39) . 'x' . sprintf('%c', 39) . ')')");
  CHECK(plot::gnuplot_string("`cmd` @macro \\ \xce\xb1 \xff") == "('`cmd` @macro \\ \xce\xb1 ?')");
}
