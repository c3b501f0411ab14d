// Model weights read one tensor at a time, for loading a model bigger than
// memory (lua/accel/big_modeling): only the tensors a device keeps are read,
// each straight into its own memory.
//
// safetensors files are memory-mapped; a load copies the tensor's bytes out
// of the map 16 MiB at a time (converting the dtype on the way when asked),
// each chunk's pages read in with one call and dropped from the process once
// copied (madvise), so reading a file costs resident memory for the tensors
// kept and one chunk of the file's. A .bin file
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
  struct MappedFile;
  struct Location {
    const MappedFile* file = nullptr;  // null for a .bin's tensor, which `held` keeps
    TensorEntry entry;
    at::Tensor held;
  };
  // Adds the tensors of one file; `wanted`, for a shard, is what the index
  // places in it, and the only tensors of it that are read.
  void add_file(const WeightsFiles& weights, const std::string& file, std::set<std::string> wanted);

  std::string path_;
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::string> names_;
  std::map<std::string, Location> tensors_;
};

}  // namespace accel::checkpoint
