// The pickle reader for torch.save files, on hand-assembled pickles: what
// Python writes for an OrderedDict state dict reads as a dict of tensors,
// and anything beyond plain data is refused by name.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cstring>
#include <string>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/pickle_reader.h"

using namespace accel::checkpoint;

namespace {

std::string bytes(const char* data, std::size_t n) { return std::string(data, n); }

at::Tensor storage_0(const std::string& key) {
  REQUIRE(key == "0");
  float values[2] = {1.5f, -2.0f};
  at::Tensor raw = at::empty({8}, at::kByte);
  std::memcpy(raw.data_ptr(), values, 8);
  return raw;
}

}  // namespace

TEST_CASE("an OrderedDict state dict with _metadata, as torch.save writes it, reads as tensors") {
  // OrderedDict([('w', _rebuild_tensor_v2(<storage '0': 2 floats>, 0, (2,), (1,), False, OrderedDict()))])
  // followed by BUILD with {'_metadata': {}}, in protocol 2.
  static const char kPickle[] =
      "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01"
      "X\x01\x00\x00\x00w"
      "ctorch._utils\n_rebuild_tensor_v2\nq\x02"
      "((X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n" "X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu"
      "K\x02tQ" "K\x00" "K\x02\x85" "K\x01\x85" "\x89" "h\x00)R" "tR"
      "s" "}X\x09\x00\x00\x00_metadata}s" "b" ".";
  NamedTensors t = unpickle_state_dict(bytes(kPickle, sizeof kPickle - 1), storage_0, "m.bin");
  REQUIRE(t.size() == 1);
  REQUIRE(t[0].first == "w");
  REQUIRE(t[0].second.scalar_type() == at::kFloat);
  REQUIRE(at::equal(t[0].second, at::tensor({1.5f, -2.0f})));
}

TEST_CASE("an empty OrderedDict reads as no tensors") {
  static const char kPickle[] = "\x80\x02" "ccollections\nOrderedDict\nq\x00)Rq\x01.";
  REQUIRE(unpickle_state_dict(bytes(kPickle, sizeof kPickle - 1), storage_0, "m.bin").empty());
}

TEST_CASE("pickles that call anything else, or end early, are refused naming the file") {
  static const char kSystem[] = "\x80\x02" "cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.";
  REQUIRE_THROWS_WITH(unpickle_state_dict(bytes(kSystem, sizeof kSystem - 1), storage_0, "m.bin"),
                      Catch::Contains("m.bin") && Catch::Contains("os.system"));
  static const char kTruncated[] = "\x80\x02}q";
  REQUIRE_THROWS_WITH(unpickle_state_dict(bytes(kTruncated, sizeof kTruncated - 1), storage_0, "m.bin"),
                      Catch::Contains("truncated"));
  static const char kList[] = "\x80\x02]q\x00.";
  REQUIRE_THROWS_WITH(unpickle_state_dict(bytes(kList, sizeof kList - 1), storage_0, "m.bin"),
                      Catch::Contains("a list, not a dict of tensors"));
  // A tensor claiming 3 elements of a 2-element storage.
  static const char kPastEnd[] =
      "\x80\x02}q\x00X\x01\x00\x00\x00w"
      "ctorch._utils\n_rebuild_tensor_v2\n"
      "((X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n" "X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu"
      "K\x02tQ" "K\x00" "K\x03\x85" "K\x01\x85" "\x89" "}tR" "s.";
  REQUIRE_THROWS_WITH(unpickle_state_dict(bytes(kPastEnd, sizeof kPastEnd - 1), storage_0, "m.bin"),
                      Catch::Contains("past the end of its storage"));
}
