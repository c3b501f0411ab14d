// safetensors files, Hugging Face weight layouts and the pickle format
// Python's torch.load reads, on real tensors and files.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/formats/format_error.h"
#include "engine/formats/safetensors.h"
#include "engine/formats/torch_pickle.h"
#include "engine/formats/weights_export.h"
#include "tests/engine/scratch_files.h"

namespace fs = std::filesystem;
using namespace accel::formats;
using accel::testing::slurp;
using accel::testing::spit;
using accel::testing::TempDir;

namespace {

NamedTensors every_dtype() {
  at::manual_seed(3);
  return {
      {"f32", at::randn({2, 3})},
      {"f64", at::randn({4}, at::kDouble)},
      {"bf16", at::randn({3, 1}).to(at::kBFloat16)},
      {"f16", at::randn({5}).to(at::kHalf)},
      {"i64", at::arange(7, at::kLong)},
      {"i32", at::arange(3, at::kInt)},
      {"i16", at::arange(2, at::kShort)},
      {"i8", at::arange(-3, 3, at::kChar)},
      {"u8", at::arange(9, at::kByte)},
      {"bool", at::arange(4).remainder(2).to(at::kBool)},
      {"scalar", at::tensor(2.5)},
      {"empty", at::empty({0, 4})},
      {"strided", at::randn({4, 6}).t()},  // not contiguous
  };
}

void require_same(const NamedTensors& got, const NamedTensors& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("tensor " << want[i].first);
    REQUIRE(got[i].first == want[i].first);
    REQUIRE(got[i].second.scalar_type() == want[i].second.scalar_type());
    REQUIRE(got[i].second.sizes() == want[i].second.sizes());
    REQUIRE(at::equal(got[i].second, want[i].second));
  }
}

uint64_t header_length(const std::string& bytes) {
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

}  // namespace

TEST_CASE("every supported dtype survives a safetensors file, in order") {
  TempDir dir;
  std::string path = dir.path + "/all.safetensors";
  NamedTensors tensors = every_dtype();
  FileDigest written = write_safetensors(path, tensors, {{"format", "pt"}});
  SafetensorsFile file = read_safetensors(path);
  require_same(file.tensors, tensors);
  REQUIRE(file.metadata.at("format") == "pt");
  REQUIRE(file.digest.size == written.size);
  REQUIRE(file.digest.crc32c == written.crc32c);
}

TEST_CASE("the file layout is the safetensors format byte for byte") {
  TempDir dir;
  std::string path = dir.path + "/t.safetensors";
  write_safetensors(path, {{"a", at::tensor({1.0f, 2.0f})}, {"b", at::tensor({int64_t{7}})}});
  std::string bytes = slurp(path);
  uint64_t n = header_length(bytes);
  REQUIRE(n % 8 == 0);  // data 8-byte aligned
  std::string header = bytes.substr(8, n);
  REQUIRE(header.rfind("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}", 0) == 0);
  REQUIRE(bytes.size() == 8 + n + 16);
  float a1 = 0;
  std::memcpy(&a1, bytes.data() + 8 + n + 4, 4);
  REQUIRE(a1 == 2.0f);
  // The format's own key is no tensor name.
  REQUIRE_THROWS_WITH(write_safetensors(path, {{"__metadata__", at::tensor({1.0f})}}),
                      Catch::Contains("t.safetensors") && Catch::Contains("'__metadata__'"));
}

TEST_CASE("a damaged safetensors file is refused naming the file and the tensor") {
  TempDir dir;
  std::string path = dir.path + "/w.safetensors";
  write_safetensors(path, {{"weight", at::randn({64})}, {"bias", at::randn({8})}});
  std::string good = slurp(path);

  spit(path, good.substr(0, good.size() - 10));
  REQUIRE_THROWS_WITH(read_safetensors(path), Catch::Contains("w.safetensors") && Catch::Contains("truncated") &&
                                                  Catch::Contains("bias"));
  spit(path, good.substr(0, 4));
  REQUIRE_THROWS_WITH(read_safetensors(path), Catch::Contains("w.safetensors"));
  std::string huge_header = good;
  huge_header[7] = 0x7f;
  spit(path, huge_header);
  REQUIRE_THROWS_WITH(read_safetensors(path), Catch::Contains("not a safetensors file"));
  std::string bad_json = good;
  bad_json[8] = '[';
  spit(path, bad_json);
  REQUIRE_THROWS_WITH(read_safetensors(path), Catch::Contains("w.safetensors"));

  // A flipped data byte reads fine on its own; the digest tells.
  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 0x40;
  spit(path, flipped);
  FileDigest expected{good.size(), 0};
  SafetensorsFile ok = read_safetensors(dir.path + "/w.safetensors");
  spit(dir.path + "/good.safetensors", good);
  expected = read_safetensors(dir.path + "/good.safetensors").digest;
  REQUIRE_THROWS_WITH(check_digest(path, expected, ok.digest), Catch::Contains("w.safetensors") &&
                                                                   Catch::Contains("checksum"));
}

TEST_CASE("headers that contradict themselves are refused") {
  auto header = [](const std::string& entry) { return "{\"x\":" + entry + "}"; };
  REQUIRE_THROWS_WITH(parse_safetensors_header(header("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"),
                                               1000, "f"),
                      Catch::Contains("'x'") && Catch::Contains("need 12 bytes"));
  REQUIRE_THROWS_WITH(parse_safetensors_header(header("{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}"),
                                               1000, "f"),
                      Catch::Contains("C64"));
  REQUIRE_THROWS_WITH(
      parse_safetensors_header("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", 1000, "f"),
      Catch::Contains("overlap"));
  REQUIRE_THROWS_WITH(parse_safetensors_header(header("{\"dtype\":\"F32\",\"shape\":[3]}"), 1000, "f"),
                      Catch::Contains("data_offsets"));
}

TEST_CASE("headers are strict JSON, bounded in size and depth, and errors name the file and field") {
  const std::string entry = "{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}";
  // YAML that is not JSON was accepted by the YAML parser the engine used.
  REQUIRE_THROWS_WITH(parse_safetensors_header("x: {dtype: U8, shape: [4], data_offsets: [0, 4]}", 1000, "w.st"),
                      Catch::Contains("w.st") && Catch::Contains("not valid JSON"));
  REQUIRE_THROWS_WITH(parse_safetensors_header("{\"x\":" + entry + ",}", 1000, "w.st"),
                      Catch::Contains("not valid JSON") && Catch::Contains("column"));
  REQUIRE_THROWS_WITH(parse_safetensors_header("{\"x\":" + entry + "} // note", 1000, "w.st"),
                      Catch::Contains("not valid JSON"));
  REQUIRE_THROWS_WITH(parse_safetensors_header("{\"x\":" + entry + ",\"x\":" + entry + "}", 1000, "w.st"),
                      Catch::Contains("w.st") && Catch::Contains("the key 'x' twice"));
  // A value whose field has the wrong type is named down to the element.
  REQUIRE_THROWS_WITH(parse_safetensors_header(
                          "{\"x\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,\"4\"]}}", 1000, "w.st"),
                      Catch::Contains("'w.st': tensor 'x': data_offsets[1] is a string, expected a non-negative integer"));
  REQUIRE_THROWS_WITH(parse_safetensors_header(
                          "{\"x\":{\"dtype\":\"U8\",\"shape\":[2.5],\"data_offsets\":[0,4]}}", 1000, "w.st"),
                      Catch::Contains("tensor 'x': shape[0] is a number with a fraction"));
  REQUIRE_THROWS_WITH(parse_safetensors_header("{\"__metadata__\":{\"a\":1}}", 1000, "w.st"),
                      Catch::Contains("__metadata__['a'] is a non-negative integer, expected a string"));
  // Nesting is refused at the bound, before the parser goes deeper.
  std::string deep = "{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
  REQUIRE_THROWS_WITH(parse_safetensors_header(deep, 1 << 20, "w.st"),
                      Catch::Contains("w.st") && Catch::Contains("more than 16 deep"));
  // Sizes whose product wraps to a few bytes were accepted as a tiny tensor.
  REQUIRE_THROWS_WITH(
      parse_safetensors_header("{\"x\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],"
                               "\"data_offsets\":[0,0]}}", 1000, "w.st"),
      Catch::Contains("tensor 'x'") && Catch::Contains("does not fit in 64 bits"));
  // Bytes that are not UTF-8 cannot be written as a name, so they are refused when saving.
  TempDir dir;
  REQUIRE_THROWS_WITH(write_safetensors(dir.path + "/w.safetensors", {{"bad\xff", at::zeros({1})}}),
                      Catch::Contains("not valid UTF-8"));
}

TEST_CASE("a sharded index is strict JSON and names the entry at fault") {
  TempDir dir;
  save_weights(dir.path, {{"a", at::ones({2})}, {"b", at::zeros({3})}}, WeightsOptions{true, 8});
  std::string index = dir.path + "/model.safetensors.index.json";
  REQUIRE(fs::exists(index));
  spit(index, "{\"weight_map\": {\"a\": \"model-00001-of-00002.safetensors\", \"b\": 7}}");
  REQUIRE_THROWS_WITH(load_weights(dir.path),
                      Catch::Contains("model.safetensors.index.json': weight_map['b'] is a non-negative integer, expected a string"));
  spit(index, "weight_map: {a: model-00001-of-00002.safetensors}");
  REQUIRE_THROWS_WITH(load_weights(dir.path), Catch::Contains("index.json") && Catch::Contains("not valid JSON"));
}

TEST_CASE("sizes parse as transformers reads max_shard_size") {
  REQUIRE(parse_size("2GB") == 2'000'000'000ull);
  REQUIRE(parse_size("500MB") == 500'000'000ull);
  REQUIRE(parse_size("1GiB") == (1ull << 30));
  REQUIRE(parse_size("10kib") == 10240ull);
  REQUIRE(parse_size("123") == 123ull);
  REQUIRE(parse_size("100B") == 100ull);
  REQUIRE(parse_size("8Mb") == 1'000'000ull);  // bits
  REQUIRE_THROWS_WITH(parse_size("1.5GB"), Catch::Contains("1.5GB"));
  REQUIRE_THROWS_WITH(parse_size("lots"), Catch::Contains("lots"));
  // Past 2^64 bytes: an error naming the size, never a wrapped value or stoull's text.
  REQUIRE(parse_size("17179869183GiB") == (1ull << 30) * 17179869183ull);
  REQUIRE_THROWS_WITH(parse_size("17179869184GiB"),
                      Catch::Contains("'17179869184GiB' is larger than any file can be"));
  REQUIRE_THROWS_WITH(parse_size("99999999999999999999GB"),
                      Catch::Contains("'99999999999999999999GB' is larger than any file can be"));
}

TEST_CASE("shards fill in order and start anew before they would overflow") {
  NamedTensors t = {{"a", at::zeros({10})}, {"b", at::zeros({10})}, {"c", at::zeros({30})}, {"d", at::zeros({5})}};
  auto plan = plan_shards(t, 100);  // a, b: 80 bytes; c: 120 bytes alone; d
  REQUIRE(plan.size() == 3);
  REQUIRE(plan[0] == std::vector<std::size_t>{0, 1});
  REQUIRE(plan[1] == std::vector<std::size_t>{2});
  REQUIRE(plan[2] == std::vector<std::size_t>{3});
  REQUIRE(plan_shards(t, 1'000'000).size() == 1);
}

TEST_CASE("sharded weights get an index and read back whole; stale shards are removed") {
  TempDir dir;
  NamedTensors t = {{"layer.weight", at::randn({16, 16})}, {"layer.bias", at::randn({16})},
                    {"head.weight", at::randn({4, 16})}, {"head.bias", at::randn({4})}};
  auto files = save_weights(dir.path, t, {true, 1100});
  REQUIRE(files == std::vector<std::string>{"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                            "model.safetensors.index.json"});
  std::string index = slurp(dir.path + "/model.safetensors.index.json");
  REQUIRE(index.find("\"total_size\": 1360") != std::string::npos);
  REQUIRE(index.find("\"head.bias\": \"model-00002-of-00002.safetensors\"") != std::string::npos);
  NamedTensors back = load_weights(dir.path);
  require_same(back, t);

  files = save_weights(dir.path, t, {true, 2'000'000'000});
  REQUIRE(files == std::vector<std::string>{"model.safetensors"});
  REQUIRE_FALSE(fs::exists(dir.path + "/model-00001-of-00002.safetensors"));
  REQUIRE_FALSE(fs::exists(dir.path + "/model.safetensors.index.json"));
  require_same(load_weights(dir.path), t);
  REQUIRE_THROWS_WITH(load_weights(dir.path + "/none"), Catch::Contains("holds no model weights"));
}

TEST_CASE("a FIFO, device or folder named as a weights file is said to be one, never opened") {
  TempDir dir;
  fs::create_directories(dir.path + "/fifo");
  REQUIRE(::mkfifo((dir.path + "/fifo/model.safetensors").c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(load_weights(dir.path + "/fifo"),
                      Catch::Contains("fifo/model.safetensors' is not a regular file"));
  fs::create_directories(dir.path + "/folder/model.safetensors");
  REQUIRE_THROWS_WITH(load_weights(dir.path + "/folder"),
                      Catch::Contains("folder/model.safetensors' is not a regular file"));
  fs::create_directories(dir.path + "/device");
  fs::create_symlink("/dev/zero", dir.path + "/device/pytorch_model.bin");
  REQUIRE_THROWS_WITH(load_weights(dir.path + "/device"),
                      Catch::Contains("device/pytorch_model.bin' is not a regular file"));
  // A shard named by an index.
  NamedTensors t = {{"a", at::ones({4})}, {"b", at::ones({4})}};
  save_weights(dir.path + "/sharded", t, {true, 20});
  const std::string shard = dir.path + "/sharded/model-00002-of-00002.safetensors";
  fs::remove(shard);
  REQUIRE(::mkfifo(shard.c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(load_weights(dir.path + "/sharded"), Catch::Contains("00002.safetensors' is not a regular file"));
}

TEST_CASE("pytorch_model.bin holds a dict that reads back, sharded or not") {
  TempDir dir;
  NamedTensors t = every_dtype();
  t.pop_back();  // strided: the pickle writes it contiguous, checked on its own below
  auto files = save_weights(dir.path, t, {false, 2'000'000'000});
  REQUIRE(files == std::vector<std::string>{"pytorch_model.bin"});
  require_same(load_weights(dir.path), t);
  REQUIRE(slurp(dir.path + "/pytorch_model.bin").rfind("PK", 0) == 0);  // a zip archive, as torch.save writes

  at::Tensor base = at::randn({4, 6});
  write_torch_state_dict(dir.path + "/view.bin", {{"part", base.narrow(0, 1, 2)}, {"t", base.t()}});
  NamedTensors views = read_torch_state_dict(dir.path + "/view.bin");
  REQUIRE(at::equal(views[0].second, base.narrow(0, 1, 2)));
  REQUIRE(at::equal(views[1].second, base.t()));

  TempDir sharded;
  files = save_weights(sharded.path, t, {false, 64});
  REQUIRE(files.back() == "pytorch_model.bin.index.json");
  REQUIRE(files.front() == "pytorch_model-00001-of-" + files.front().substr(23, 5) + ".bin");
  require_same(load_weights(sharded.path), t);

  spit(dir.path + "/pytorch_model.bin", "not a zip");
  REQUIRE_THROWS_WITH(load_weights(dir.path), Catch::Contains("pytorch_model.bin"));
}

namespace {

// Marks the record whose name ends with `suffix` deflated, inflating to
// `size` bytes, in the zip's central directory: a zip bomb's entry.
void declare_size(std::string& zip, const std::string& suffix, uint32_t size) {
  for (std::size_t at = zip.find("PK\x01\x02"); at != std::string::npos; at = zip.find("PK\x01\x02", at + 4)) {
    uint16_t name_bytes = 0;
    std::memcpy(&name_bytes, &zip[at + 28], 2);
    std::string name = zip.substr(at + 46, name_bytes);
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      uint32_t current = 0;
      std::memcpy(&current, &zip[at + 24], 4);
      REQUIRE(current != 0xffffffffu);  // a small archive has no zip64 sizes
      std::memcpy(&zip[at + 24], &size, 4);
      const uint16_t deflated = 8;
      std::memcpy(&zip[at + 10], &deflated, 2);
      return;
    }
  }
  FAIL("no record ends with " << suffix);
}

}  // namespace

TEST_CASE("a pytorch_model.bin record may not declare more than the pickle says it holds") {
  // miniz allocates a record at the size the zip directory declares and
  // inflates into it: a 2 MB file could ask for gigabytes.
  TempDir dir;
  const std::string path = dir.path + "/pytorch_model.bin";
  write_torch_state_dict(path, {{"w", at::ones({2})}});
  const std::string good = slurp(path);
  // Writes the archive with the record ending with `suffix` declared as a
  // 4 GB zip bomb's entry.
  auto bomb = [&](const std::string& suffix) {
    std::string bytes = good;
    declare_size(bytes, suffix, 0xfffffff0u);
    spit(path, bytes);
  };
  bomb("/data/0");
  REQUIRE_THROWS_WITH(read_torch_state_dict(path),
                      Catch::Contains("pytorch_model.bin': storage '0' holds 4294967280 bytes, but the pickle "
                                      "declares 8"));
  bomb("/data.pkl");
  REQUIRE_THROWS_WITH(read_torch_state_dict(path),
                      Catch::Contains("record 'archive/data.pkl' declares 4294967280 bytes, more than the "
                                      "67108864"));
  // LibTorch's reader extracts the version record as it opens the archive.
  bomb("/version");
  REQUIRE_THROWS_WITH(read_torch_state_dict(path), Catch::Contains("/version' declares 4294967280 bytes"));
  // A damaged directory is refused by name, before LibTorch's reader sees it.
  std::string cut = good;
  cut.resize(cut.rfind("PK\x05\x06") + 10);
  spit(path, cut);
  REQUIRE_THROWS_WITH(read_torch_state_dict(path),
                      Catch::Contains("pytorch_model.bin' is not a zip archive torch.save could have written"));
  spit(path, good);
  REQUIRE(at::equal(read_torch_state_dict(path)[0].second, at::ones({2})));
}
