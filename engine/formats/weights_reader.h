// Model weights read one tensor at a time, for loading a model bigger than
// memory (lua/accel/big_modeling): only the tensors a device keeps are read.
//
// A safetensors file is opened and its header read. map() gives a tensor
// over the file's own bytes (mapped_tensor.h: private, copy-on-write), as
// Accelerate's memory-mapped safetensors do: loading reads nothing and the
// first forward pages the weights in, the kernel's read-ahead running ahead
// of it; a 2 GiB checkpoint loads and runs its first forward cold in about
// the time `dd` takes to read it (bench/README.md, "big_model"). load()
// reads a tensor's bytes with pread straight into memory of its own (a
// dtype conversion goes through a 16 MiB buffer): for conversions, for small
// tensors, and for parts offloaded to disk, read before each forward and
// freed after it. A .bin file (PyTorch's pickle format) has no index to find
// one tensor by without unpickling the archive, so it is read whole when
// opened, as torch.load does, and its tensors are handed out from there.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/formats/safetensors.h"
#include "engine/formats/weights_export.h"

namespace accel::formats {

class KeptWeights;

class WeightsReader {
 public:
  // `path`: a .safetensors or .bin file (told apart by their first bytes),
  // or a folder that save_weights (weights_export.h) wrote. Errors name the
  // file at fault. With `kept` (a warm worker's), map() hands out
  // copy-on-write copies of the safetensors tensors a previous run read,
  // and keeps what it reads (kept_weights.h).
  explicit WeightsReader(const std::string& path, KeptWeights* kept = nullptr);
  ~WeightsReader();
  WeightsReader(const WeightsReader&) = delete;
  WeightsReader& operator=(const WeightsReader&) = delete;

  // Every tensor's name, in the order the files hold them.
  const std::vector<std::string>& names() const { return names_; }
  // The tensor's dtype and shape as stored; an unknown name is an error
  // naming it and `path`.
  const TensorEntry& info(const std::string& name) const;
  // A CPU tensor with its own memory, converted to `dtype` when given.
  at::Tensor load(const std::string& name, c10::optional<at::ScalarType> dtype = c10::nullopt) const;
  // The tensor over a private mapping of its bytes in the file
  // (mapped_tensor.h) when it needs no conversion, holds at least
  // kMapMinBytes and lies aligned to its elements; otherwise as load().
  // With kept weights, a copy of the kept tensor instead.
  at::Tensor map(const std::string& name, c10::optional<at::ScalarType> dtype = c10::nullopt) const;
  // Smaller tensors are read: a mapping takes whole pages and a kernel
  // mapping (a VMA) of its own.
  static constexpr uint64_t kMapMinBytes = uint64_t{1} << 20;
  const std::string& path() const { return path_; }

 private:
  struct TensorFile;
  struct Location {
    TensorFile* file = nullptr;  // null for a .bin's tensor, which `held` keeps
    TensorEntry entry;
    at::Tensor held;
  };
  // Adds the tensors of one file; `wanted`, for a shard, is what the index
  // places in it, and the only tensors of it that are read.
  void add_file(const WeightsFiles& weights, const std::string& file, std::set<std::string> wanted);

  std::string path_;
  KeptWeights* kept_ = nullptr;
  std::vector<std::unique_ptr<TensorFile>> files_;
  std::vector<std::string> names_;
  std::map<std::string, Location> tensors_;
};

}  // namespace accel::formats
