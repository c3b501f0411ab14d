#include "engine/checkpoint/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstring>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/pickle_reader.h"

namespace accel::checkpoint {

FileDigest write_torch_state_dict(const std::string& path, const NamedTensors& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t = tensor.cpu().contiguous();
    // The pickle stores whole storages: a view would drag its base along.
    bool owns_storage = t.storage_offset() == 0 &&
                        t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
    dict.insert(name, owns_storage ? t : t.clone());
  }
  // What torch::jit::pickle_save writes, streamed to the file instead of
  // gathered in memory first.
  std::string pickle;
  torch::jit::Pickler pickler([&pickle](const char* data, size_t size) { pickle.append(data, size); }, nullptr,
                              nullptr, nullptr);
  pickler.protocol();
  pickler.pushIValue(c10::IValue(dict));
  pickler.stop();
  FileWriter writer(path);
  caffe2::serialize::PyTorchStreamWriter archive([&writer](const void* data, size_t size) {
    writer.write(data, size);
    return size;
  });
  torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(), archive);
  archive.writeEndOfFile();
  return writer.finish();
}

NamedTensors read_torch_state_dict(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    auto [pickle_data, pickle_size] = archive.getRecord("data.pkl");
    std::string pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    auto load_record = [&archive](const std::string& key) {
      auto [data, size] = archive.getRecord("data/" + key);
      at::Tensor bytes = at::empty({static_cast<int64_t>(size)}, at::kByte);
      std::memcpy(bytes.data_ptr(), data.get(), size);
      return bytes;
    };
    return unpickle_state_dict(pickle, load_record, path);
  } catch (const c10::Error& e) {
    throw CheckpointError("'" + path + "' is not a file torch.save wrote (a zip archive with data.pkl): " +
                          e.what_without_backtrace());
  }
}

}  // namespace accel::checkpoint
