#include "engine/formats/torch_pickle.h"

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <cstring>

#include "engine/formats/format_error.h"
#include "engine/formats/file_io.h"
#include "engine/formats/pickle_reader.h"
#include "engine/formats/zip_directory.h"

namespace accel::formats {
namespace {

// A state dict's pickle holds names, shapes and storage keys: about 200
// bytes per tensor, so 64 MiB is a third of a million tensors. The other
// records that are not storages (version, byte order) hold a few bytes.
constexpr uint64_t kMaxPickleBytes = 64ull << 20;

}  // namespace

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
  // The directory is read first, so no record is inflated beyond what the
  // pickle declares (a 2 MB file could otherwise ask for gigabytes).
  FileReader file(path);  // refuses what is not a regular file
  ZipDirectory zip([&](uint64_t offset, void* out, std::size_t n) { file.read_at(offset, out, n, "the zip directory"); },
                   file.size(), path);
  // LibTorch's reader extracts some records as it opens the archive (the
  // version): only storages (checked against the pickle below) may be large.
  zip.record("data.pkl");
  for (const auto& [name, entry] : zip.entries()) {
    if (name.find("/data/") == std::string::npos && entry.uncompressed_size > kMaxPickleBytes) {
      throw FormatError("'" + path + "': its record '" + name + "' declares " +
                            std::to_string(entry.uncompressed_size) + " bytes, more than the " +
                            std::to_string(kMaxPickleBytes) + " a record other than a storage may have");
    }
  }
  try {
    caffe2::serialize::PyTorchStreamReader archive(path);
    auto [pickle_data, pickle_size] = archive.getRecord("data.pkl");
    std::string pickle(static_cast<const char*>(pickle_data.get()), pickle_size);
    auto load_record = [&](const std::string& key, uint64_t bytes) {
      uint64_t declared = zip.record("data/" + key).uncompressed_size;
      if (declared != bytes) {
        throw FormatError("'" + path + "': storage '" + key + "' holds " + std::to_string(declared) +
                              " bytes, but the pickle declares " + std::to_string(bytes));
      }
      auto [data, size] = archive.getRecord("data/" + key);
      at::Tensor out = at::empty({static_cast<int64_t>(size)}, at::kByte);
      // An empty record has no bytes, and LibTorch gives it no pointer.
      if (size > 0) std::memcpy(out.data_ptr(), data.get(), size);
      return out;
    };
    return unpickle_state_dict(pickle, load_record, path);
  } catch (const c10::Error& e) {
    throw FormatError("'" + path + "' is not a file torch.save wrote (a zip archive with data.pkl): " +
                          e.what_without_backtrace());
  }
}

}  // namespace accel::formats
