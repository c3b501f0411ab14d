// WeightsReader: one tensor at a time out of safetensors files,
// sharded folders and .bin files, on real files.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/formats/format_error.h"
#include "engine/formats/weights_export.h"
#include "engine/formats/weights_reader.h"
#include "tests/engine/scratch_files.h"

using namespace accel::formats;
using accel::testing::TempDir;

namespace {

NamedTensors sample() {
  return {{"embed.weight", at::randn({5, 4})},
          {"layer.bias", at::arange(6, at::kLong)},
          {"layer.weight", at::randn({3, 2}).to(at::kBFloat16)},
          {"empty", at::empty({0, 3})}};
}

void check_reads_back(const WeightsReader& reader, const NamedTensors& expected) {
  REQUIRE(reader.names().size() == expected.size());
  for (const auto& [name, tensor] : expected) {
    const TensorEntry& entry = reader.info(name);
    CHECK(entry.dtype == tensor.scalar_type());
    CHECK(entry.shape == tensor.sizes().vec());
    at::Tensor loaded = reader.load(name);
    CHECK(loaded.scalar_type() == tensor.scalar_type());
    CHECK(at::equal(loaded, tensor));
  }
}

// Resident pages of this process, in bytes.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

}  // namespace

TEST_CASE("a safetensors file reads back one tensor at a time, in file order") {
  TempDir dir;
  NamedTensors t = sample();
  write_safetensors(dir.path + "/w.safetensors", t);
  WeightsReader reader(dir.path + "/w.safetensors");
  check_reads_back(reader, t);
  CHECK(reader.names().front() == "embed.weight");
  CHECK(reader.info("layer.bias").end - reader.info("layer.bias").begin == 6 * 8);
}

TEST_CASE("loading converts the dtype on the way") {
  TempDir dir;
  NamedTensors t = sample();
  write_safetensors(dir.path + "/w.safetensors", t);
  WeightsReader reader(dir.path + "/w.safetensors");
  at::Tensor half = reader.load("embed.weight", at::kHalf);
  CHECK(half.scalar_type() == at::kHalf);
  CHECK(at::equal(half, t[0].second.to(at::kHalf)));
  CHECK(at::equal(reader.load("layer.weight", at::kFloat), t[2].second.to(at::kFloat)));
}

TEST_CASE("folders save_weights wrote read back, sharded or not, safetensors or .bin") {
  NamedTensors t = sample();
  for (bool safe : {true, false}) {
    for (uint64_t shard_bytes : {uint64_t{2'000'000'000}, uint64_t{64}}) {
      TempDir dir;
      auto files = save_weights(dir.path, t, {safe, shard_bytes});
      CHECK((files.size() > 1) == (shard_bytes == 64));
      WeightsReader reader(dir.path);
      check_reads_back(reader, t);
      if (!safe) {
        WeightsReader one_file(dir.path + "/" + files.front());  // a .bin named directly
        CHECK_FALSE(one_file.names().empty());
      }
    }
  }
}

TEST_CASE("a loaded tensor costs its own memory and none of the file's") {
  TempDir dir;
  const int64_t n = 16 << 20;  // 64 MiB of float32
  write_safetensors(dir.path + "/big.safetensors", {{"w", at::ones({n})}});
  WeightsReader reader(dir.path + "/big.safetensors");
  int64_t before = resident_bytes();
  at::Tensor w = reader.load("w");
  int64_t grown = resident_bytes() - before;
  CHECK(w.sum().item<double>() == static_cast<double>(n));
  // The tensor's own 64 MiB; a mapped or buffered copy of the file's bytes
  // kept in the process would double it.
  CHECK(grown < n * 4 + (24 << 20));
}

TEST_CASE("unknown names, missing shards and files that are not weights are refused by name") {
  TempDir dir;
  write_safetensors(dir.path + "/w.safetensors", sample());
  WeightsReader reader(dir.path + "/w.safetensors");
  CHECK_THROWS_WITH(reader.load("nope"), Catch::Contains("holds no tensor named 'nope'") &&
                                             Catch::Contains("w.safetensors"));
  TempDir sharded;
  auto files = save_weights(sharded.path, sample(), {true, 64});
  std::remove((sharded.path + "/" + files.front()).c_str());
  CHECK_THROWS_WITH(WeightsReader(sharded.path), Catch::Contains(files.front()) && Catch::Contains("missing"));
  TempDir empty;
  CHECK_THROWS_WITH(WeightsReader(empty.path), Catch::Contains("holds no model weights"));
  accel::testing::spit(empty.path + "/junk.safetensors", "not a safetensors file at all");
  CHECK_THROWS_WITH(WeightsReader(empty.path + "/junk.safetensors"), Catch::Contains("junk.safetensors"));
}

TEST_CASE("a file that shrinks after it was opened ends the load with an error naming it") {
  TempDir dir;
  const std::string path = dir.path + "/w.safetensors";
  write_safetensors(path, {{"a", at::ones({1000})}, {"b", at::ones({1000})}});
  WeightsReader reader(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
  CHECK(at::equal(reader.load("a"), at::ones({1000})));
  CHECK_THROWS_WITH(reader.load("b"), Catch::Contains("w.safetensors") && Catch::Contains("tensor 'b'"));
}
