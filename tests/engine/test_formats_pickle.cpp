// The pickle reader for torch.save files, on hand-assembled pickles: what
// Python writes for an OrderedDict state dict reads as a dict of tensors,
// and anything beyond plain data is refused by name.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <cstring>
#include <string>

#include "engine/formats/format_error.h"
#include "engine/formats/pickle_reader.h"

using namespace accel::formats;

namespace {

std::string bytes(const char* data, std::size_t n) { return std::string(data, n); }

at::Tensor storage_0(const std::string& key, uint64_t declared_bytes) {
  REQUIRE(key == "0");
  REQUIRE(declared_bytes == 8);
  float values[2] = {1.5f, -2.0f};
  at::Tensor raw = at::empty({8}, at::kByte);
  std::memcpy(raw.data_ptr(), values, 8);
  return raw;
}

// {'w': _rebuild_tensor_v2(<storage '0': 2 floats>, offset, size, stride)}, the three given as
// pickle opcodes (BININT1 K, LONG1 \x8a, each tuple closed by TUPLE1 \x85).
std::string one_tensor(const std::string& offset, const std::string& size, const std::string& stride) {
  static const char kHead[] =
      "\x80\x02}q\x00X\x01\x00\x00\x00w"
      "ctorch._utils\n_rebuild_tensor_v2\n"
      "((X\x07\x00\x00\x00storage" "ctorch\nFloatStorage\n" "X\x01\x00\x00\x00" "0" "X\x03\x00\x00\x00" "cpu"
      "K\x02tQ";
  return bytes(kHead, sizeof kHead - 1) + offset + size + stride + "\x89}tRs.";
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
  std::string past_end = one_tensor(std::string("K\x00", 2), "K\x03\x85", "K\x01\x85");
  REQUIRE_THROWS_WITH(unpickle_state_dict(past_end, storage_0, "m.bin"), Catch::Contains("past the end of its storage"));
}

TEST_CASE("a storage offset near 2^63 cannot wrap the bounds check into a view before the storage") {
  // _rebuild_tensor_v2(<storage '0': 2 floats>, 2^63 - 1, (2,), (2,)): offset + 1 * 2 wraps to
  // a negative position in int64, which an unchecked sum takes for "inside the storage".
  std::string wrapping = one_tensor(std::string("\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f", 10), "K\x02\x85",
                                    "K\x02\x85");
  REQUIRE_THROWS_WITH(unpickle_state_dict(wrapping, storage_0, "m.bin"),
                      Catch::Contains("m.bin") && Catch::Contains("past the end of its storage"));
  // Offset 0 with a stride whose product with the size overflows.
  std::string stride = one_tensor(std::string("K\x00", 2), "K\x03\x85",
                                  std::string("\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x40\x85", 11));
  REQUIRE_THROWS_WITH(unpickle_state_dict(stride, storage_0, "m.bin"), Catch::Contains("past the end of its storage"));
}

TEST_CASE("tuples nested 200,000 deep are refused, and freeing what was read does not recurse") {
  // EMPTY_TUPLE, then TUPLE1 200,000 times: about 200 KB.
  std::string deep = "\x80\x02)" + std::string(200000, '\x85') + ".";
  REQUIRE_THROWS_WITH(unpickle_state_dict(deep, storage_0, "m.bin"),
                      Catch::Contains("m.bin") && Catch::Contains("nests containers more than"));
  // Lists chained 200,000 deep through the memo: list i is appended into list i - 1 after both
  // were made, which the depth bound cannot see. Freeing the chain must not recurse.
  auto memo_key = [](uint32_t i) { return std::string(reinterpret_cast<const char*>(&i), 4); };
  std::string chained = "\x80\x02]r" + memo_key(0);
  for (uint32_t i = 1; i <= 200000; ++i) {
    // LONG_BINGET i - 1, EMPTY_LIST, LONG_BINPUT i, APPEND, POP
    chained += "j" + memo_key(i - 1) + "]r" + memo_key(i) + "a0";
  }
  chained += "j" + memo_key(0) + ".";
  REQUIRE_THROWS_WITH(unpickle_state_dict(chained, storage_0, "m.bin"),
                      Catch::Contains("not a dict of tensors"));
}

TEST_CASE("a pickle makes at most one value per two of its bytes, memo entries counted") {
  // EMPTY_LIST 400,000 times: a new value from every byte (it cost 143 bytes of memory each).
  const std::string lists = "\x80\x02" + std::string(400000, ']') + ".";
  REQUIRE_THROWS_WITH(unpickle_state_dict(lists, storage_0, "m.bin"),
                      Catch::Contains("'m.bin': the pickle makes more than 265537 values from 400003 bytes"));
  // MEMOIZE 400,000 times: a memo entry from every byte.
  const std::string memo = "\x80\x02]" + std::string(400000, '\x94') + ".";
  REQUIRE_THROWS_WITH(unpickle_state_dict(memo, storage_0, "m.bin"), Catch::Contains("the pickle makes more than"));
  // The densest form a state dict takes, small ints at two bytes each, stays within it.
  std::string ints = "\x80\x02](";
  for (int i = 0; i < 200000; ++i) ints += "K\x07";
  ints += "e.";
  REQUIRE_THROWS_WITH(unpickle_state_dict(ints, storage_0, "m.bin"), Catch::Contains("holds a list, not a dict"));
}

TEST_CASE("a storage's declared element count is checked before its record is read") {
  // The FloatStorage of one_tensor declares 2 elements (K\x02); here 2^62, whose bytes overflow.
  std::string huge = one_tensor("K\x00", "K\x02\x85", "K\x01\x85");
  std::string count = "\x8a\x08" + std::string("\x00\x00\x00\x00\x00\x00\x00\x40", 8);  // LONG1 2^62
  huge.replace(huge.find("K\x02tQ"), 2, count);
  REQUIRE_THROWS_WITH(unpickle_state_dict(huge, storage_0, "m.bin"),
                      Catch::Contains("m.bin") && Catch::Contains("storage '0' declares no valid element count"));
  // A record whose size differs from the declaration is refused, naming the storage.
  auto short_record = [](const std::string&, uint64_t) { return at::empty({4}, at::kByte); };
  REQUIRE_THROWS_WITH(unpickle_state_dict(one_tensor("K\x00", "K\x02\x85", "K\x01\x85"), short_record, "m.bin"),
                      Catch::Contains("storage '0' has 4 bytes, but the pickle declares 8"));
}
