// A checkpoint folder's table of contents, `manifest.json`, written last:
// a folder whose manifest is missing was never finished. Example:
//
//   {
//     "format": "accel-checkpoint",
//     "format_version": 1,
//     "step": 20,
//     "iteration": 1,
//     "world_size": 2,
//     "files": [
//       {"name": "model.safetensors", "format": "safetensors", "size": 6664, "crc32c": "1c2d3e4f"},
//       {"name": "rng_0.safetensors", "format": "safetensors", "size": 5184, "crc32c": "0badf00d"},
//       {"name": "scheduler.lua", "format": "lua", "size": 210, "crc32c": "01234567"}
//     ]
//   }
//
// "format" of a file: "safetensors", or "lua" (a Lua value as text, written
// by lua/accel/serialize.lua). Sizes are bytes; checksums CRC-32C in hex.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/formats/file_io.h"

namespace accel::formats {

inline constexpr const char* kManifestName = "manifest.json";
inline constexpr const char* kManifestFormat = "accel-checkpoint";
inline constexpr int kManifestFormatVersion = 1;

struct ManifestFile {
  std::string name;  // relative to the checkpoint folder, no '/'
  std::string format;
  FileDigest digest;
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  int64_t step = 0;       // synchronised training steps when saved
  int64_t iteration = 0;  // the save's number (automatic names: checkpoint_<iteration>)
  int64_t world_size = 1;
  std::vector<ManifestFile> files;

  // The entry for `name`; an error naming the file and the folder when absent.
  const ManifestFile& file(const std::string& name, const std::string& folder) const;
};

std::string manifest_to_json(const Manifest& manifest);

// `source` names the manifest in errors. A newer format_version, a missing
// field or a file name with a '/' is an error.
Manifest parse_manifest(const std::string& json, const std::string& source);

// Writes folder/manifest.json and fsyncs it.
void write_manifest(const std::string& folder, const Manifest& manifest);

// Reads folder/manifest.json. Without one the folder is refused as an
// incomplete checkpoint, in a message naming it.
Manifest read_manifest(const std::string& folder);

// Every file the manifest lists exists with the size it records (a cheap
// check before reading anything); the error names the first that does not.
// Also refuses, naming the file, one that is not a regular file (a FIFO
// would block its reader forever) or that leads out of `folder` through a
// symbolic link.
void check_file_sizes(const std::string& folder, const Manifest& manifest);

}  // namespace accel::formats
