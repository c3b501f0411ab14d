// The trackers' pieces alone: TensorBoard's record framing against values
// TensorBoard's own masked_crc32c gives, metrics.jsonl lines, buffering
// until the interval or flush, the UTF-8 checks on names, and the quoting
// that keeps names from files out of gnuplot's code.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

#include "engine/plot/gnuplot_script.h"
#include "engine/tracking/jsonl_tracker.h"
#include "engine/tracking/record_framing.h"
#include "engine/tracking/utf8.h"
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

TEST_CASE("UTF-8 checks follow RFC 3629") {
  CHECK(tracking::valid_utf8("loss/\xce\xb1"));
  CHECK_FALSE(tracking::valid_utf8("\xc0\xaf"));          // overlong
  CHECK_FALSE(tracking::valid_utf8("\xed\xa0\x80"));      // a surrogate
  CHECK_FALSE(tracking::valid_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  CHECK_FALSE(tracking::valid_utf8("\xe2\x82"));          // cut short
}

TEST_CASE("names reach gnuplot as single-quoted text") {
  CHECK(plot::gnuplot_string("it's") == "'it''s'");
  CHECK(plot::gnuplot_string("a\nsystem('x')") == "'a?system(''x'')'");
  CHECK(plot::gnuplot_string("`cmd` @macro \\ \xce\xb1 \xff") == "'`cmd` @macro \\ \xce\xb1 ?'");
}
