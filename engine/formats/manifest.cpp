#include "engine/formats/manifest.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "engine/formats/format_error.h"
#include "engine/json/json_reader.h"

namespace accel::formats {
namespace {

using strict_json::json_integer;
using strict_json::json_member;
using strict_json::json_string;
using strict_json::json_unsigned;
using strict_json::json_utf8;

// A manifest lists a few files per rank: megabytes would be a run of
// hundreds of thousands of ranks.
constexpr uint64_t kMaxManifestBytes = 64ull << 20;

uint32_t parse_crc(const std::string& text, const std::string& source, const std::string& file) {
  char* end = nullptr;
  unsigned long value = std::strtoul(text.c_str(), &end, 16);
  if (text.size() != 8 || *end != '\0') {
    throw FormatError("'" + source + "': file '" + file + "' has crc32c '" + text +
                          "', expected 8 hex digits");
  }
  return static_cast<uint32_t>(value);
}

Manifest manifest_from_json(const std::string& json, const std::string& source) {
  nlohmann::json root = strict_json::parse_json(json, source, kMaxManifestBytes);
  std::string where = "'" + source + "'";
  auto member = [&](const char* key) -> const nlohmann::json& { return json_member(root, key, where); };
  auto named = [&](const char* key) { return where + ": " + key; };
  if (json_string(member("format"), named("format")) != kManifestFormat) {
    throw FormatError(where + " is not an accel checkpoint manifest (format is not '" +
                          std::string(kManifestFormat) + "')");
  }
  Manifest m;
  int64_t version = json_integer(member("format_version"), named("format_version"));
  if (version < 1 || version > kManifestFormatVersion) {
    throw FormatError(where + " has format_version " + std::to_string(version) + "; this engine reads version " +
                          std::to_string(kManifestFormatVersion));
  }
  m.format_version = static_cast<int>(version);
  m.step = json_integer(member("step"), named("step"));
  m.iteration = json_integer(member("iteration"), named("iteration"));
  m.world_size = json_integer(member("world_size"), named("world_size"));
  const nlohmann::json& files = member("files");
  if (!files.is_array()) throw FormatError(where + ": 'files' is not a list");
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::string at = where + ": files[" + std::to_string(i) + "]";
    const nlohmann::json& entry = files[i];
    ManifestFile f;
    f.name = json_string(json_member(entry, "name", at), at + ".name");
    if (f.name.empty() || f.name.find('/') != std::string::npos || f.name == "." || f.name == "..") {
      throw FormatError(where + " lists the file name '" + f.name +
                            "', which is not a plain name inside the checkpoint");
    }
    f.format = json_string(json_member(entry, "format", at), at + ".format");
    f.digest.size = json_unsigned(json_member(entry, "size", at), at + ".size");
    f.digest.crc32c = parse_crc(json_string(json_member(entry, "crc32c", at), at + ".crc32c"), source, f.name);
    m.files.push_back(std::move(f));
  }
  return m;
}

}  // namespace

const ManifestFile& Manifest::file(const std::string& name, const std::string& folder) const {
  for (const ManifestFile& f : files) {
    if (f.name == name) return f;
  }
  throw FormatError("checkpoint '" + folder + "' has no file '" + name + "' in its manifest");
}

std::string manifest_to_json(const Manifest& m) {
  // Keys in the order a reader expects them, as written before.
  nlohmann::ordered_json root;
  root["format"] = kManifestFormat;
  root["format_version"] = m.format_version;
  root["step"] = m.step;
  root["iteration"] = m.iteration;
  root["world_size"] = m.world_size;
  nlohmann::ordered_json& files = root["files"] = nlohmann::ordered_json::array();
  for (const ManifestFile& f : m.files) {
    files.push_back({{"name", json_utf8(f.name, "the checkpoint file name '" + f.name + "'")},
                     {"format", json_utf8(f.format, "the format of '" + f.name + "'")},
                     {"size", f.digest.size},
                     {"crc32c", crc32c_hex(f.digest.crc32c)}});
  }
  return root.dump(2) + "\n";
}

Manifest parse_manifest(const std::string& json, const std::string& source) {
  return rethrow_json_errors([&] { return manifest_from_json(json, source); });
}

void write_manifest(const std::string& folder, const Manifest& manifest) {
  write_whole_file(folder + "/" + kManifestName, manifest_to_json(manifest));
}

Manifest read_manifest(const std::string& folder) {
  std::string path = folder + "/" + kManifestName;
  struct stat st {};
  if (::stat(folder.c_str(), &st) != 0) {
    throw FormatError("checkpoint '" + folder + "' does not exist");
  }
  if (::stat(path.c_str(), &st) != 0) {
    throw FormatError("checkpoint '" + folder + "' is incomplete: it has no " + kManifestName +
                          " (a save that did not finish); load an older checkpoint");
  }
  return parse_manifest(read_whole_file(path, kMaxManifestBytes), path);
}

void check_file_sizes(const std::string& folder, const Manifest& manifest) {
  // A checkpoint written by accel holds regular files only. A symbolic link
  // leading out of the folder would read whatever it names, and a FIFO
  // would block its reader forever: both are refused, naming the file.
  char* resolved_folder = ::realpath(folder.c_str(), nullptr);
  if (!resolved_folder) {
    throw FormatError("checkpoint folder '" + folder + "' cannot be resolved: " + std::strerror(errno));
  }
  const std::string inside = std::string(resolved_folder) + "/";
  std::free(resolved_folder);
  for (const ManifestFile& f : manifest.files) {
    std::string path = folder + "/" + f.name;
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      throw FormatError("checkpoint file '" + path + "' is listed in the manifest but missing: " +
                            std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
      throw FormatError("checkpoint file '" + path + "' is not a regular file (" + file_kind(st.st_mode) +
                            "): refusing to read it");
    }
    char* target = ::realpath(path.c_str(), nullptr);
    const std::string resolved = target ? target : "";
    std::free(target);
    if (resolved.rfind(inside, 0) != 0) {
      throw FormatError("checkpoint file '" + path + "' leads out of its folder (to '" + resolved +
                            "'): refusing to read it");
    }
    if (static_cast<uint64_t>(st.st_size) != f.digest.size) {
      throw FormatError("checkpoint file '" + path + "' has " + std::to_string(st.st_size) +
                            " bytes but the manifest says " + std::to_string(f.digest.size) +
                            ": it is truncated or was replaced");
    }
  }
}

}  // namespace accel::formats
