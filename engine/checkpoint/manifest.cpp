#include "engine/checkpoint/manifest.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/json.h"

namespace accel::checkpoint {
namespace {

template <class T>
T field(const YAML::Node& node, const char* key, const std::string& source) {
  const YAML::Node& value = node[key];
  if (!value) throw CheckpointError("'" + source + "' has no '" + key + "'");
  try {
    return value.as<T>();
  } catch (const YAML::Exception&) {
    throw CheckpointError("'" + source + "': '" + key + "' has the wrong type");
  }
}

uint32_t parse_crc(const std::string& text, const std::string& source, const std::string& file) {
  char* end = nullptr;
  unsigned long value = std::strtoul(text.c_str(), &end, 16);
  if (text.size() != 8 || *end != '\0') {
    throw CheckpointError("'" + source + "': file '" + file + "' has crc32c '" + text +
                          "', expected 8 hex digits");
  }
  return static_cast<uint32_t>(value);
}

}  // namespace

const ManifestFile& Manifest::file(const std::string& name, const std::string& folder) const {
  for (const ManifestFile& f : files) {
    if (f.name == name) return f;
  }
  throw CheckpointError("checkpoint '" + folder + "' has no file '" + name + "' in its manifest");
}

std::string manifest_to_json(const Manifest& m) {
  std::string json = "{\n";
  json += "  \"format\": " + json_quote(kManifestFormat) + ",\n";
  json += "  \"format_version\": " + std::to_string(m.format_version) + ",\n";
  json += "  \"step\": " + std::to_string(m.step) + ",\n";
  json += "  \"iteration\": " + std::to_string(m.iteration) + ",\n";
  json += "  \"world_size\": " + std::to_string(m.world_size) + ",\n";
  json += "  \"files\": [";
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const ManifestFile& f = m.files[i];
    json += i ? ",\n    " : "\n    ";
    json += "{\"name\": " + json_quote(f.name) + ", \"format\": " + json_quote(f.format) +
            ", \"size\": " + std::to_string(f.digest.size) + ", \"crc32c\": \"" +
            crc32c_hex(f.digest.crc32c) + "\"}";
  }
  json += m.files.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return json;
}

Manifest parse_manifest(const std::string& json, const std::string& source) {
  YAML::Node root = parse_json(json, source);
  if (field<std::string>(root, "format", source) != kManifestFormat) {
    throw CheckpointError("'" + source + "' is not an accel checkpoint manifest (format is not '" +
                          std::string(kManifestFormat) + "')");
  }
  Manifest m;
  m.format_version = field<int>(root, "format_version", source);
  if (m.format_version < 1 || m.format_version > kManifestFormatVersion) {
    throw CheckpointError("'" + source + "' has format_version " + std::to_string(m.format_version) +
                          "; this engine reads version " + std::to_string(kManifestFormatVersion));
  }
  m.step = field<int64_t>(root, "step", source);
  m.iteration = field<int64_t>(root, "iteration", source);
  m.world_size = field<int64_t>(root, "world_size", source);
  const YAML::Node& files = root["files"];
  if (!files || !files.IsSequence()) throw CheckpointError("'" + source + "' has no 'files' list");
  for (const YAML::Node& entry : files) {
    ManifestFile f;
    f.name = field<std::string>(entry, "name", source);
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." || f.name == "..") {
      throw CheckpointError("'" + source + "' lists the file name '" + f.name +
                            "', which is not a plain name inside the checkpoint");
    }
    f.format = field<std::string>(entry, "format", source);
    f.digest.size = field<uint64_t>(entry, "size", source);
    f.digest.crc32c = parse_crc(field<std::string>(entry, "crc32c", source), source, f.name);
    m.files.push_back(std::move(f));
  }
  return m;
}

void write_manifest(const std::string& folder, const Manifest& manifest) {
  write_whole_file(folder + "/" + kManifestName, manifest_to_json(manifest));
}

Manifest read_manifest(const std::string& folder) {
  std::string path = folder + "/" + kManifestName;
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    throw CheckpointError("checkpoint '" + folder + "' does not exist");
  }
  if (::stat(path.c_str(), &st) != 0) {
    throw CheckpointError("checkpoint '" + folder + "' is incomplete: it has no " + kManifestName +
                          " (a save that did not finish); load an older checkpoint");
  }
  return parse_manifest(read_whole_file(path), path);
}

void check_file_sizes(const std::string& folder, const Manifest& manifest) {
  // A checkpoint written by accel holds regular files only. A symbolic link
  // leading out of the folder would read whatever it names, and a FIFO
  // would block its reader forever: both are refused, naming the file.
  char* resolved_folder = ::realpath(folder.c_str(), nullptr);
  if (!resolved_folder) {
    throw CheckpointError("checkpoint folder '" + folder + "' cannot be resolved: " + std::strerror(errno));
  }
  const std::string inside = std::string(resolved_folder) + "/";
  std::free(resolved_folder);
  for (const ManifestFile& f : manifest.files) {
    std::string path = folder + "/" + f.name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      throw CheckpointError("checkpoint file '" + path + "' is listed in the manifest but missing: " +
                            std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      throw CheckpointError("checkpoint file '" + path + "' is not a regular file (" + file_kind(st.st_mode) +
                            "): refusing to read it");
    }
    char* target = ::realpath(path.c_str(), nullptr);
    const std::string resolved = target ? target : "";
    std::free(target);
    if (resolved.rfind(inside, 0) != 0) {
      throw CheckpointError("checkpoint file '" + path + "' leads out of its folder (to '" + resolved +
                            "'): refusing to read it");
    }
    if (static_cast<uint64_t>(st.st_size) != f.digest.size) {
      throw CheckpointError("checkpoint file '" + path + "' has " + std::to_string(st.st_size) +
                            " bytes but the manifest says " + std::to_string(f.digest.size) +
                            ": it is truncated or was replaced");
    }
  }
}

}  // namespace accel::checkpoint
