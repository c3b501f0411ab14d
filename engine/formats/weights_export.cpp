#include "engine/formats/weights_export.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "engine/formats/atomic_folder.h"
#include "engine/formats/format_error.h"
#include "engine/formats/torch_pickle.h"
#include "engine/json/json_reader.h"

namespace accel::formats {
namespace {

namespace fs = std::filesystem;
using strict_json::json_member;
using strict_json::json_string;
using strict_json::json_utf8;

struct Layout {
  const char* single;  // model.safetensors
  const char* stem;    // model
  const char* suffix;  // .safetensors
  const char* index;   // model.safetensors.index.json
};

constexpr Layout kSafetensors{"model.safetensors", "model", ".safetensors", "model.safetensors.index.json"};
constexpr Layout kPickle{"pytorch_model.bin", "pytorch_model", ".bin", "pytorch_model.bin.index.json"};

// An index maps every tensor name to its shard: a few MB for the largest
// models published.
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

std::string shard_name(const Layout& layout, std::size_t k, std::size_t n) {
  char text[64];
  std::snprintf(text, sizeof text, "-%05zu-of-%05zu", k, n);
  return std::string(layout.stem) + text + layout.suffix;
}

uint64_t tensor_bytes(const at::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

// Writes under a temporary name, then renames: a reader never sees half a file.
void write_file_atomically(const std::string& path, const NamedTensors& tensors, bool safe) {
  std::string partial = path + ".tmp";
  if (safe) {
    write_safetensors(partial, tensors, {{"format", "pt"}});  // transformers requires format = pt
  } else {
    write_torch_state_dict(partial, tensors);
  }
  if (std::rename(partial.c_str(), path.c_str()) != 0) {
    throw FormatError("cannot rename '" + partial + "' to '" + path + "'");
  }
}

std::string index_json(const NamedTensors& tensors, const std::vector<std::vector<std::size_t>>& shards,
                       const std::vector<std::string>& names) {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) total += tensor_bytes(t);
  nlohmann::ordered_json index;
  index["metadata"] = {{"total_size", total}};
  nlohmann::ordered_json& weight_map = index["weight_map"] = nlohmann::ordered_json::object();
  for (std::size_t s = 0; s < shards.size(); ++s) {
    for (std::size_t i : shards[s]) {
      weight_map[json_utf8(tensors[i].first, "the tensor name '" + tensors[i].first + "'")] =
          json_utf8(names[s], "the shard name '" + names[s] + "'");
    }
  }
  return index.dump(2) + "\n";
}

// Shard files and index of an earlier save in `layout` that `keep` does not list.
void remove_stale(const std::string& folder, const Layout& layout, const std::set<std::string>& keep) {
  std::regex shard(std::string(layout.stem) + "-\\d{5}-of-\\d{5}\\" + layout.suffix);
  for (const auto& entry : fs::directory_iterator(folder)) {
    std::string name = entry.path().filename().string();
    bool ours = name == layout.single || name == layout.index || std::regex_match(name, shard);
    if (ours && entry.is_regular_file() && !keep.count(name)) fs::remove(entry.path());
  }
}

// Whether a weights file is there: a regular file is, nothing is not, and
// anything else under that name (a FIFO, a device, a folder) is an error
// saying so rather than "missing" (and is never opened).
bool exists(const std::string& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (!fs::exists(status)) return false;
  if (!fs::is_regular_file(status)) {
    throw FormatError("'" + path + "' is not a regular file (a FIFO, device or folder); weights are files");
  }
  return true;
}

WeightsFiles index_files(const std::string& folder, const Layout& layout) {
  WeightsFiles weights;
  weights.safe = &layout == &kSafetensors;
  weights.index = folder + "/" + layout.index;
  const std::string& index_path = weights.index;
  nlohmann::json index = strict_json::parse_json(read_whole_file(index_path, kMaxIndexBytes), index_path, kMaxIndexBytes);
  const nlohmann::json& map = json_member(index, "weight_map", "'" + index_path + "'");
  if (!map.is_object()) throw FormatError("'" + index_path + "': weight_map is not an object");
  std::map<std::string, std::set<std::string>> wanted;  // shard file -> its tensors; shards in name order
  for (const auto& [tensor, value] : map.items()) {
    std::string file = json_string(value, "'" + index_path + "': weight_map['" + tensor + "']");
    if (file.find('/') != std::string::npos) {
      throw FormatError("'" + index_path + "' maps '" + tensor + "' to '" + file + "', outside the folder");
    }
    wanted[file].insert(tensor);
  }
  for (auto& [file, names] : wanted) {
    std::string path = folder + "/" + file;
    if (!exists(path)) throw FormatError("'" + index_path + "' names the shard '" + file + "', which is missing");
    weights.files.emplace_back(path, std::move(names));
  }
  return weights;
}

}  // namespace

uint64_t parse_size(const std::string& text) {
  struct Unit {
    const char* name;  // upper case
    uint64_t bytes;
  };
  static const Unit units[] = {{"GIB", 1ull << 30}, {"MIB", 1ull << 20}, {"KIB", 1ull << 10},
                               {"GB", 1'000'000'000}, {"MB", 1'000'000}, {"KB", 1'000},
                               {"B", 1}, {"", 1}};
  std::string upper;
  for (char c : text) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Unit& unit : units) {
    std::string name = unit.name;
    if (upper.size() <= name.size() || upper.compare(upper.size() - name.size(), name.size(), name) != 0) continue;
    std::string digits = text.substr(0, text.size() - name.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) break;
    // Checked arithmetic: a size past 2^64 bytes is an error, never a
    // wrapped one (17179869184GiB is 2^64, which would be 0).
    uint64_t count = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), count);
    uint64_t bytes = 0;
    if (error != std::errc() || end != digits.data() + digits.size() || __builtin_mul_overflow(count, unit.bytes, &bytes)) {
      throw FormatError("max_shard_size '" + text + "' is larger than any file can be (over 2^64 bytes)");
    }
    bool bits = name.size() == 2 && text.back() == 'b';
    return bits ? bytes / 8 : bytes;
  }
  throw FormatError("max_shard_size '" + text + "' is not a size: use an integer and a unit, e.g. '2GB', "
                        "'500MB' or '1GiB'");
}

std::vector<std::vector<std::size_t>> plan_shards(const NamedTensors& tensors, uint64_t max_shard_bytes) {
  std::vector<std::vector<std::size_t>> shards(1);
  uint64_t filled = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    uint64_t bytes = tensor_bytes(tensors[i].second);
    if (filled + bytes > max_shard_bytes && !shards.back().empty()) {
      shards.emplace_back();
      filled = 0;
    }
    shards.back().push_back(i);
    filled += bytes;
  }
  return shards;
}

std::vector<std::string> save_weights(const std::string& folder, const NamedTensors& tensors,
                                      const WeightsOptions& options) {
  const Layout& layout = options.safe_serialization ? kSafetensors : kPickle;
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) throw FormatError("cannot create the folder '" + folder + "': " + ec.message());
  auto shards = plan_shards(tensors, options.max_shard_bytes);
  std::vector<std::string> names;
  if (shards.size() == 1) {
    names.push_back(layout.single);
  } else {
    for (std::size_t s = 0; s < shards.size(); ++s) names.push_back(shard_name(layout, s + 1, shards.size()));
  }
  for (std::size_t s = 0; s < shards.size(); ++s) {
    NamedTensors part;
    for (std::size_t i : shards[s]) part.push_back(tensors[i]);
    write_file_atomically(folder + "/" + names[s], part, options.safe_serialization);
  }
  if (shards.size() > 1) {
    std::string index = folder + "/" + layout.index;
    write_whole_file(index + ".tmp", index_json(tensors, shards, names));
    if (std::rename((index + ".tmp").c_str(), index.c_str()) != 0) {
      throw FormatError("cannot rename '" + index + ".tmp' to '" + index + "'");
    }
    names.push_back(layout.index);
  }
  remove_stale(folder, layout, std::set<std::string>(names.begin(), names.end()));
  fsync_path(folder);
  return names;
}

WeightsFiles locate_weights(const std::string& folder) {
  for (const Layout* layout : {&kSafetensors, &kPickle}) {
    if (exists(folder + "/" + layout->single)) {
      WeightsFiles weights;
      weights.safe = layout == &kSafetensors;
      weights.files.emplace_back(folder + "/" + layout->single, std::set<std::string>{});
      return weights;
    }
    if (exists(folder + "/" + layout->index)) return rethrow_json_errors([&] { return index_files(folder, *layout); });
  }
  throw FormatError("'" + folder + "' holds no model weights (looked for model.safetensors, "
                        "model.safetensors.index.json, pytorch_model.bin and pytorch_model.bin.index.json)");
}

void check_shard_holds(const WeightsFiles& weights, const std::string& file, const std::set<std::string>& missing) {
  if (missing.empty()) return;
  throw FormatError("'" + file + "' lacks the tensor '" + *missing.begin() + "' that '" + weights.index +
                        "' places in it");
}

NamedTensors load_weights(const std::string& folder) {
  WeightsFiles weights = locate_weights(folder);
  NamedTensors out;
  for (auto& [path, names] : weights.files) {
    NamedTensors tensors = weights.safe ? read_safetensors(path).tensors : read_torch_state_dict(path);
    if (weights.index.empty()) return tensors;
    for (auto& entry : tensors) {
      if (names.erase(entry.first)) out.push_back(std::move(entry));
    }
    check_shard_holds(weights, path, names);
  }
  return out;
}

}  // namespace accel::formats
