// Reads the pickle inside PyTorch's zip-format files (what Python's
// torch.save and LibTorch's pickle_save write) as a dict of tensors.
//
// LibTorch's own unpickler turns collections.OrderedDict into None, so it
// cannot read torch.save(model.state_dict()), the usual pytorch_model.bin.
// This one interprets the part of Python's pickle protocols 2 to 5 that
// such a file uses (containers, strings, numbers, globals, REDUCE/BUILD,
// persistent ids) and knows these callables: collections.OrderedDict and
// builtins.dict (a dict; BUILD state such as _metadata is ignored),
// torch._utils._rebuild_tensor_v2 / _rebuild_tensor / _rebuild_parameter,
// and torch.jit._pickle.restore_type_tag (pickle_save's type tags). Any
// other callable is an error naming it.
#pragma once
#include <ATen/core/Tensor.h>

#include <functional>
#include <string>

#include "engine/formats/safetensors.h"

namespace accel::formats {

// `load_record(key, bytes)` returns storage `key`'s bytes (the archive's
// data/<key>) as a 1-D uint8 tensor; `bytes` is what the pickle declares the
// storage holds, for the caller to check before it reads anything.
// `source` names the file in errors.
using LoadRecord = std::function<at::Tensor(const std::string& key, uint64_t bytes)>;
NamedTensors unpickle_state_dict(const std::string& pickle, const LoadRecord& load_record, const std::string& source);

}  // namespace accel::formats
