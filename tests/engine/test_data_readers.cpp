// Data file readers: gzip or plain text, CSV columns, and vocabularies.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/data/csv_reader.h"
#include "engine/data/file_text.h"
#include "engine/data/vocabulary.h"

namespace {

std::string temp_path(const std::string& suffix) {
  char name[] = "/tmp/accel_data_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  std::remove(name);
  return std::string(name) + suffix;
}

std::string write_plain(const std::string& text) {
  const std::string path = temp_path(".csv");
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

std::string write_gzip(const std::string& text) {
  const std::string path = temp_path(".csv.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  return path;
}

}  // namespace

TEST_CASE("files read the same plain and gzip-compressed", "[readers]") {
  const std::string text = "1,2\n3,4\n";
  const std::string plain = write_plain(text), gz = write_gzip(text);
  CHECK(accel::data::read_file_text(plain) == text);
  CHECK(accel::data::read_file_text(gz) == text);
  CHECK_THROWS_WITH(accel::data::read_file_text(plain + ".missing"),
                    Catch::Contains("cannot open") && Catch::Contains("No such file"));
}

TEST_CASE("a truncated gzip file is an error, not a short file", "[readers]") {
  std::string big;
  for (int i = 0; i < 20000; ++i) big += std::to_string(i) + "," + std::to_string(i * 7 % 13) + "\n";
  const std::string gz = write_gzip(big);
  std::ifstream in(gz, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(gz, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  CHECK_THROWS_WITH(accel::data::read_file_text(gz), Catch::Contains("cannot read") && Catch::Contains(gz));
}

TEST_CASE("a gzip file may not expand beyond a bound relative to its size", "[readers]") {
  // 200 MB of one repeated line compresses about 1000 times: a bomb.
  const std::string path = temp_path(".csv.gz");
  gzFile f = gzopen(path.c_str(), "wb9");
  REQUIRE(f);
  const std::string block(1 << 20, '0');
  for (int i = 0; i < 200; ++i) gzwrite(f, block.data(), static_cast<unsigned>(block.size()));
  gzclose(f);
  CHECK_THROWS_WITH(accel::data::read_file_text(path),
                    Catch::Contains(path) && Catch::Contains("expands to more than 67108864 bytes") &&
                        Catch::Contains("decompress it yourself"));
  // A device without end (no size on disk) stops at the floor.
  CHECK_THROWS_WITH(accel::data::read_file_text("/dev/zero"), Catch::Contains("expands to more than 67108864"));
}

TEST_CASE("CSV columns parse on request, with file:line: column errors", "[readers]") {
  const std::string path = write_plain("id,x,name\n1,0.5,ann\n\n2,-1e3,bob\n3,oops,cy\n");
  const auto table = accel::data::CsvTable::read(path, {true, ','});
  CHECK(table.num_rows() == 3);
  CHECK(table.num_columns() == 3);
  CHECK(table.column_index("x") == 1);
  const at::Tensor ids = table.columns({0}, at::kLong);
  CHECK(ids.equal(at::tensor(std::vector<int64_t>{1, 2, 3}, at::kLong).view({3, 1})));
  CHECK_THROWS_WITH(table.columns({1}, at::kFloat),
                    Catch::Contains(path + ":5: column 2 'oops' is not a number (column 'x')"));
  CHECK_THROWS_WITH(table.column_index("y"), Catch::Contains("no column named 'y'"));
}

TEST_CASE("a NUL in a CSV cell is shown, not the end of the message", "[readers]") {
  const std::string path = write_plain(std::string("x,y\n1,a\0b\x1b[31m\n", 15));
  const auto table = accel::data::CsvTable::read(path, {true, ','});
  CHECK_THROWS_WITH(table.columns({1}, at::kFloat),
                    Catch::Contains(path + ":2: column 2 'a\\x00b\\x1b[31m' is not a number (column 'y')"));
}

TEST_CASE("vocabularies: sorted characters, 1-based ids, positions in errors", "[readers]") {
  const auto vocab = accel::data::Vocabulary::chars_of("ba\nab", "t.txt");
  CHECK(vocab.tokens() == std::vector<std::string>{"\n", "a", "b"});
  const at::Tensor ids = vocab.encode("ab\nba", "t.txt");
  CHECK(ids.equal(at::tensor(std::vector<int64_t>{2, 3, 1, 3, 2}, at::kLong)));
  CHECK(vocab.decode(ids) == "ab\nba");
  CHECK_THROWS_WITH(vocab.encode("ab\nbc", "v.txt"), Catch::Contains("v.txt:2:2: character 'c'"));
  CHECK_THROWS_WITH(accel::data::Vocabulary::chars_of("a\xC3(", "bad.txt"),
                    Catch::Contains("bad.txt:1:2: byte 0xC3 is not valid UTF-8"));
  CHECK_THROWS_WITH(accel::data::Vocabulary::chars_of("\xC0\x80", "overlong.txt"),
                    Catch::Contains("not valid UTF-8"));
  CHECK(accel::data::Vocabulary::bytes().encode(std::string("\x00\xff", 2), "b").equal(
      at::tensor(std::vector<int64_t>{1, 256}, at::kLong)));
}
