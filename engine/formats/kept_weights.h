// Weights a warm worker keeps between runs (accel-run serve, --watch,
// repl), so a later run's from_pretrained is handed tensors already in
// memory instead of reading the file again: the tensors from_pretrained
// read (through WeightsReader::map) are copied once, as the run that read
// them loaded them, into memory of the worker's own (a memfd per tensor),
// and every later run gets a private copy-on-write mapping of that copy.
// So a run gets its own weights at the cost of a mapping: what it changes
// in place (an optimizer step, copy_, a broadcast into the parameter)
// copies only the pages it writes, for it alone, and the next run starts
// from the bytes of the file again, whatever the runs before it did.
//
// A tensor is kept under a key naming its file by identity (path, device,
// inode, size and modification time: a file saved again is another file),
// the tensor's name and the dtype it was loaded as. end_run() forgets what
// the run that ended did not use, so what is kept is what the last run
// loaded.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace accel::formats {

class KeptWeights {
 public:
  KeptWeights();
  ~KeptWeights();
  KeptWeights(const KeptWeights&) = delete;
  KeptWeights& operator=(const KeptWeights&) = delete;

  // A copy-on-write copy of the tensor kept under `key`, if one is.
  c10::optional<at::Tensor> find(const std::string& key);
  // Keeps a copy of `t` (just read from its file, as the run has it) under
  // `key`. A tensor it cannot copy (no memory for it) is not kept.
  void keep(const std::string& key, const at::Tensor& t);
  // Drops what was neither found nor kept since the last end_run().
  void end_run();

  struct Counts {
    int64_t kept = 0;  // tensors held now
    int64_t found = 0;  // find() hits since the process started
  };
  Counts counts() const;

 private:
  struct Entry;
  std::map<std::string, std::unique_ptr<Entry>> entries_;
  int64_t found_ = 0;
};

}  // namespace accel::formats
