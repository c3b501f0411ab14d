#include "engine/formats/weights_reader.h"

#include <ATen/ATen.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "engine/formats/format_error.h"
#include "engine/formats/kept_weights.h"
#include "engine/formats/mapped_tensor.h"
#include "engine/formats/torch_pickle.h"

namespace accel::formats {

// A safetensors file, open for as long as the reader lives, its header
// read and checked.
struct WeightsReader::TensorFile {
  FileReader reader;  // refuses what is not a regular file, naming it
  SafetensorsHeader header;
  // The file as kept weights know it (kept_weights.h): its path, device,
  // inode, size and modification time.
  std::string identity;

  explicit TensorFile(const std::string& path) : reader(path), header(read_safetensors_header(reader)) {
    struct stat st {};
    if (::fstat(reader.fd(), &st) != 0) throw FormatError("cannot stat '" + path + "'");
    identity = path + '\n' + std::to_string(st.st_dev) + ':' + std::to_string(st.st_ino) + ':' +
               std::to_string(st.st_size) + ':' + std::to_string(st.st_mtim.tv_sec) + '.' +
               std::to_string(st.st_mtim.tv_nsec);
  }

  // Reads one tensor straight into its own memory; a conversion goes
  // through a buffer of one chunk.
  at::Tensor load(const TensorEntry& entry, at::ScalarType dtype) {
    at::Tensor out = at::empty(entry.shape, at::TensorOptions().dtype(dtype));
    const int64_t numel = out.numel();
    if (numel == 0) return out;
    // The tensor's fresh pages fault in as the read first writes them: as
    // huge pages, 512 times fewer faults (where the kernel leaves
    // transparent huge pages to madvise).
    advise_huge_pages(out.data_ptr(), out.nbytes());
    const uint64_t at_offset = header.data_start + entry.begin;
    const std::string what = "tensor '" + entry.name + "'";
    if (dtype == entry.dtype) {
      reader.read_at(at_offset, out.data_ptr(), out.nbytes(), what.c_str());
      return out;
    }
    at::Tensor flat = out.view({numel});
    const int64_t element = static_cast<int64_t>(at::elementSize(entry.dtype));
    const int64_t chunk = std::max<int64_t>(1, kChunkBytes / element);
    at::Tensor stored = at::empty({std::min(chunk, numel)}, at::TensorOptions().dtype(entry.dtype));
    for (int64_t first = 0; first < numel; first += chunk) {
      const int64_t n = std::min(chunk, numel - first);
      reader.read_at(at_offset + static_cast<uint64_t>(first * element), stored.data_ptr(),
                     static_cast<std::size_t>(n * element), what.c_str());
      flat.narrow(0, first, n).copy_(stored.narrow(0, 0, n));
    }
    return out;
  }

 private:
  static constexpr int64_t kChunkBytes = int64_t{16} << 20;

  static void advise_huge_pages(void* data, std::size_t bytes) {
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(data) + bytes) / page * page;
    if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
  }
};

namespace {

bool is_zip(const std::string& path) {
  FileReader reader(path);
  if (reader.size() < 4) return false;
  char magic[4];
  reader.read(magic, 4, "the first bytes");
  return std::memcmp(magic, "PK\x03\x04", 4) == 0;
}

}  // namespace

WeightsReader::WeightsReader(const std::string& path, KeptWeights* kept) : path_(path), kept_(kept) {
  WeightsFiles weights;
  if (std::filesystem::is_directory(path)) {
    weights = locate_weights(path);
  } else {
    weights.safe = !is_zip(path);
    weights.files.emplace_back(path, std::set<std::string>{});
  }
  for (auto& [file, wanted] : weights.files) add_file(weights, file, std::move(wanted));
}

WeightsReader::~WeightsReader() = default;

void WeightsReader::add_file(const WeightsFiles& weights, const std::string& file, std::set<std::string> wanted) {
  bool sharded = !weights.index.empty();
  auto add = [&](const std::string& name, Location location) {
    if (sharded && !wanted.erase(name)) return;  // the index places it elsewhere
    if (!tensors_.emplace(name, std::move(location)).second) {
      throw FormatError("'" + file + "': the tensor '" + name + "' appears twice in '" + path_ + "'");
    }
    names_.push_back(name);
  };
  if (weights.safe) {
    files_.push_back(std::make_unique<TensorFile>(file));
    for (const TensorEntry& entry : files_.back()->header.tensors) add(entry.name, {files_.back().get(), entry, {}});
  } else {
    for (auto& [name, tensor] : read_torch_state_dict(file)) {
      TensorEntry entry;
      entry.name = name;
      entry.dtype = tensor.scalar_type();
      entry.shape = tensor.sizes().vec();
      entry.end = static_cast<uint64_t>(tensor.numel()) * tensor.element_size();
      add(name, {nullptr, entry, tensor});
    }
  }
  if (sharded) check_shard_holds(weights, file, wanted);
}

const TensorEntry& WeightsReader::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw FormatError("'" + path_ + "' holds no tensor named '" + name + "'");
  return it->second.entry;
}

at::Tensor WeightsReader::load(const std::string& name, c10::optional<at::ScalarType> dtype) const {
  info(name);
  const Location& location = tensors_.at(name);
  at::ScalarType type = dtype.value_or(location.entry.dtype);
  if (location.file) return location.file->load(location.entry, type);
  // A .bin's tensor is handed out as a copy, so the caller owns its memory
  // as it would a mapped tensor's.
  return location.held.to(type, /*non_blocking=*/false, /*copy=*/true);
}

at::Tensor WeightsReader::map(const std::string& name, c10::optional<at::ScalarType> dtype) const {
  const TensorEntry& entry = info(name);
  const Location& location = tensors_.at(name);
  const uint64_t bytes = entry.end - entry.begin;
  const uint64_t offset = location.file ? location.file->header.data_start + entry.begin : 0;
  std::string key;
  if (kept_ && location.file) {
    key = location.file->identity + '\n' + name + '\n' + std::to_string(static_cast<int>(dtype.value_or(entry.dtype)));
    if (c10::optional<at::Tensor> found = kept_->find(key)) return *found;
  }
  at::Tensor t;
  if (!location.file || dtype.value_or(entry.dtype) != entry.dtype || bytes < kMapMinBytes ||
      offset % at::elementSize(entry.dtype) != 0) {
    t = load(name, dtype);
  } else {
    t = map_tensor(location.file->reader, offset, entry.shape, entry.dtype, "tensor '" + name + "'");
  }
  if (!key.empty()) kept_->keep(key, t);
  return t;
}

}  // namespace accel::formats
