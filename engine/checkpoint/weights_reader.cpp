#include "engine/checkpoint/weights_reader.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/torch_pickle.h"

namespace accel::checkpoint {

// A safetensors file mapped read-only for as long as the reader lives.
struct WeightsReader::MappedFile {
  std::string path;
  const unsigned char* base = nullptr;
  std::size_t size = 0;
  SafetensorsHeader header;

  explicit MappedFile(std::string file) : path(std::move(file)) {
    FileReader reader(path);  // refuses what is not a regular file, naming it
    size = reader.size();
    header = read_safetensors_header(reader);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw CheckpointError("cannot open '" + path + "': " + std::strerror(errno));
    // The header was checked against the size read then: a file that has
    // changed since would let a tensor's range run past the map.
    struct stat st {};
    if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) != size) {
      ::close(fd);
      throw CheckpointError("'" + path + "' changed while it was being opened");
    }
    void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int saved = errno;
    ::close(fd);  // the mapping keeps the file
    if (map == MAP_FAILED) throw CheckpointError("cannot map '" + path + "' into memory: " + std::strerror(saved));
    base = static_cast<const unsigned char*>(map);
  }
  ~MappedFile() { ::munmap(const_cast<unsigned char*>(base), size); }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Copies one tensor out of the map a chunk at a time, each chunk's pages
  // read in with one call and handed back once copied: they stay in the page
  // cache, not in this process, so loading a tensor costs its own memory and
  // at most one chunk of the file's.
  at::Tensor load(const TensorEntry& entry, at::ScalarType dtype) const {
    at::Tensor out = at::empty(entry.shape, at::TensorOptions().dtype(dtype));
    const int64_t numel = out.numel();
    if (numel == 0) return out;
    const unsigned char* data = base + header.data_start + entry.begin;
    // from_blob never writes through the pointer; copy_ only reads it.
    at::Tensor stored = at::from_blob(const_cast<unsigned char*>(data), {numel},
                                      at::TensorOptions().dtype(entry.dtype));
    at::Tensor flat = out.view({numel});
    // The tensor's own fresh pages fault in as the copy first writes them:
    // as huge pages, 512 times fewer faults (where the kernel leaves
    // transparent huge pages to madvise).
    advise(static_cast<const unsigned char*>(out.data_ptr()), static_cast<int64_t>(out.nbytes()), MADV_HUGEPAGE);
    const int64_t element = static_cast<int64_t>(at::elementSize(entry.dtype));
    const int64_t chunk = std::max<int64_t>(1, kChunkBytes / element);
    for (int64_t first = 0; first < numel; first += chunk) {
      const int64_t n = std::min(chunk, numel - first);
      const unsigned char* from = data + first * element;
      advise(from, n * element, MADV_POPULATE_READ);
      flat.narrow(0, first, n).copy_(stored.narrow(0, first, n));
      advise(from, n * element, MADV_DONTNEED);
    }
    return out;
  }

 private:
  static constexpr int64_t kChunkBytes = int64_t{16} << 20;

  // madvise over the whole pages that hold [from, from + bytes). Advice only:
  // a kernel without MADV_POPULATE_READ (before Linux 5.14) faults the pages
  // in as the copy reads them.
  static void advise(const unsigned char* from, int64_t bytes, int advice) {
    static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t first = reinterpret_cast<uintptr_t>(from) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(from) + static_cast<uintptr_t>(bytes) + page - 1) / page * page;
    ::madvise(reinterpret_cast<void*>(first), last - first, advice);
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

WeightsReader::WeightsReader(const std::string& path) : path_(path) {
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
      throw CheckpointError("'" + file + "': the tensor '" + name + "' appears twice in '" + path_ + "'");
    }
    names_.push_back(name);
  };
  if (weights.safe) {
    files_.push_back(std::make_unique<MappedFile>(file));
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
  if (it == tensors_.end()) throw CheckpointError("'" + path_ + "' holds no tensor named '" + name + "'");
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

}  // namespace accel::checkpoint
