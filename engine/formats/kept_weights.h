// Weights a warm worker keeps between runs (accel-run --watch, repl), so a
// rerun after an edit starts from weights already in memory: a model that
// from_pretrained loaded (through WeightsReader::map) is handed the same
// bytes again, without opening a mapping and faulting its pages in anew.
//
// A tensor is kept under a key naming its file by identity (path, device,
// inode, size and modification time: a file saved again is another file),
// the tensor's name and the dtype it was loaded as. What a run gets is an
// alias (a tensor of its own sharing the bytes and their version counter),
// never the kept tensor itself, so a run's set_data, requires_grad or
// gradients never reach the next one. A run that changed the bytes in
// place (an optimizer step, copy_, any in-place op, a broadcast into the
// parameter) bumped their version: the next find() drops the entry and the
// weights are read from the file again, so a rerun never sees another run's
// changes. end_run() forgets what the run that ended did not use, so what
// is kept is what the last run loaded.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <map>
#include <string>

namespace accel::formats {

class KeptWeights {
 public:
  // An alias of the tensor kept under `key` when its bytes are unchanged.
  c10::optional<at::Tensor> find(const std::string& key);
  // Keeps `t` (just read from its file) under `key`.
  void keep(const std::string& key, const at::Tensor& t);
  // Drops what was neither found nor kept since the last end_run().
  void end_run();

  struct Counts {
    int64_t kept = 0;  // tensors held now
    int64_t found = 0;  // find() hits since the process started
  };
  Counts counts() const;

 private:
  struct Entry {
    at::Tensor alias;
    int64_t version = 0;
    bool used = true;
  };
  std::map<std::string, Entry> entries_;
  int64_t found_ = 0;
};

}  // namespace accel::formats
