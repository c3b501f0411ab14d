// Model weights in the layout Hugging Face tools read (transformers'
// from_pretrained, the safetensors library):
//
//   one file   model.safetensors            (or pytorch_model.bin)
//   sharded    model-00001-of-00003.safetensors, ... and
//              model.safetensors.index.json (or pytorch_model-0000k-of-0000N.bin
//              and pytorch_model.bin.index.json):
//                {"metadata": {"total_size": <bytes of all tensors>},
//                 "weight_map": {"<tensor name>": "<shard file>", ...}}
//
// Shards are filled in the order the tensors are given, a new one starting
// when the next tensor would push the current one past the limit (a tensor
// larger than the limit gets a shard of its own), as transformers does.
// Each file is written under a temporary name and renamed into place, the
// index last; shard files of an earlier save of the same kind that the new
// save does not use are removed.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/formats/safetensors.h"

namespace accel::formats {

struct WeightsOptions {
  bool safe_serialization = true;  // safetensors; false: PyTorch's pickle format
  uint64_t max_shard_bytes = 2'000'000'000;
};

// "2GB" -> 2e9 bytes, "500MiB" -> 500 * 2^20, "10KB", "123" (bytes), as
// transformers reads max_shard_size (a lowercase final "b", as in "5Gb",
// means bits). Anything else is an error quoting the text.
uint64_t parse_size(const std::string& text);

// Indices into `tensors`, one list per shard.
std::vector<std::vector<std::size_t>> plan_shards(const NamedTensors& tensors, uint64_t max_shard_bytes);

// Writes into `folder` (created when missing) and returns the file names
// written, the index last when there is one.
std::vector<std::string> save_weights(const std::string& folder, const NamedTensors& tensors,
                                      const WeightsOptions& options);

// Where a folder's weights are: the single file, or every shard its index
// names with the tensors the index places there.
struct WeightsFiles {
  bool safe = true;  // safetensors; false: PyTorch's pickle format
  std::string index;  // the index's path; empty for a single file
  // Each file's path and, for shards, the tensors it must hold (a single
  // file holds whatever it holds).
  std::vector<std::pair<std::string, std::set<std::string>>> files;
};

// Looks for the single safetensors file, its index, the single .bin or its
// index, in that order of preference. Errors name the folder, the index or
// the missing shard.
WeightsFiles locate_weights(const std::string& folder);

// Throws, naming the shard and the index, when `missing` (tensors the index
// places in `file` that it lacks) is not empty.
void check_shard_holds(const WeightsFiles& weights, const std::string& file, const std::set<std::string>& missing);

// Reads what save_weights (or transformers' save_pretrained) wrote: the
// single safetensors file, its index, the single .bin or its index, in that
// order of preference. Errors name the folder or the file at fault.
NamedTensors load_weights(const std::string& folder);

}  // namespace accel::formats
