// Model weights read one tensor at a time, for loading a model bigger than
// memory (lua/accel/big_modeling): only the tensors a device keeps are read,
// each straight into its own memory.
//
// A safetensors file is opened and its header read; a load reads just that
// tensor's bytes with pread, straight into the tensor's own memory (a dtype
// conversion goes through a 16 MiB buffer), so reading costs resident memory
// for the tensors kept and nothing for the rest of the file. The files are
// not memory-mapped: faulting a mapping in read the disk one read-ahead
// window at a time, and a 2 GiB checkpoint loaded cold in 6.0 s mapped
// against 0.93 s read (bench/README.md, "big_model"). A .bin file
// (PyTorch's pickle format) has no index to find one tensor by without
// unpickling the archive, so it is read whole when opened, as torch.load
// does, and its tensors are handed out from there.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/checkpoint/safetensors.h"
#include "engine/checkpoint/weights_export.h"

namespace accel::checkpoint {

class WeightsReader {
 public:
  // `path`: a .safetensors or .bin file (told apart by their first bytes),
  // or a folder that save_weights (weights_export.h) wrote. Errors name the
  // file at fault.
  explicit WeightsReader(const std::string& path);
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
  std::vector<std::unique_ptr<TensorFile>> files_;
  std::vector<std::string> names_;
  std::map<std::string, Location> tensors_;
};

}  // namespace accel::checkpoint
