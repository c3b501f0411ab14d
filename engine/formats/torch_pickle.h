// `pytorch_model.bin` files: a dict of tensors in PyTorch's own format (a
// zip archive holding a pickle and the tensors' storages), what Python's
// torch.save(dict) writes and torch.load reads. This is the one translation
// unit that includes LibTorch's serialisation headers.
#pragma once
#include <string>

#include "engine/formats/file_io.h"
#include "engine/formats/safetensors.h"

namespace accel::formats {

// Writes the tensors as one dict, in order, and fsyncs.
FileDigest write_torch_state_dict(const std::string& path, const NamedTensors& tensors);

// Reads a dict (or OrderedDict, as torch.save(model.state_dict()) writes)
// of string -> tensor through pickle_reader.h; anything else is an error
// naming the file.
NamedTensors read_torch_state_dict(const std::string& path);

}  // namespace accel::formats
