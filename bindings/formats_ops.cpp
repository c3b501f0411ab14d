// accel.core.formats: the engine's checkpoint I/O for
// lua/accel/checkpointing.lua, which decides what goes into a checkpoint.
// File digests travel as {size = bytes, crc32c = "8 hex digits"}, tensor
// collections as lists of {name, tensor} (written in that order) or maps
// name -> tensor (read back).
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>

#include "bindings/checkpoint_values.h"
#include "bindings/kept_weights.h"
#include "bindings/op_tables.h"
#include "bindings/typed_userdata.h"
#include "engine/formats/atomic_folder.h"
#include "engine/formats/format_error.h"
#include "engine/formats/fault_injection.h"
#include "engine/formats/kept_weights.h"
#include "engine/formats/manifest.h"
#include "engine/formats/safetensors.h"
#include "engine/formats/weights_export.h"
#include "engine/formats/weights_reader.h"
#include "engine/tokenizers/kept_tokenizers.h"
#include "engine/files/outside_file.h"

namespace accel::lua {

namespace formats = accel::formats;
namespace fs = std::filesystem;

// Shared with async_checkpoint_ops.cpp (checkpoint_values.h), as are
// read_pairs and read_manifest_table below.

Pushed push_digest(lua_State* L, const formats::FileDigest& digest) {
  lua_createtable(L, 0, 2);
  lua_pushnumber(L, static_cast<lua_Number>(digest.size));
  lua_setfield(L, -2, "size");
  std::string crc = formats::crc32c_hex(digest.crc32c);
  lua_pushlstring(L, crc.data(), crc.size());
  lua_setfield(L, -2, "crc32c");
  return Pushed{1};
}

std::string string_field(lua_State* L, int table, const char* key, const std::string& what) {
  lua_getfield(L, table, key);
  if (lua_type(L, -1) != LUA_TSTRING) throw ArgError(what + " needs a string '" + key + "'");
  std::string value = lua_tostring(L, -1);
  lua_pop(L, 1);
  return value;
}

double number_field(lua_State* L, int table, const char* key, const std::string& what) {
  lua_getfield(L, table, key);
  if (lua_type(L, -1) != LUA_TNUMBER) throw ArgError(what + " needs a number '" + key + "'");
  double value = lua_tonumber(L, -1);
  lua_pop(L, 1);
  return value;
}

formats::FileDigest read_digest(lua_State* L, int table, const std::string& what) {
  luaL_checktype(L, table, LUA_TTABLE);
  formats::FileDigest digest;
  digest.size = static_cast<uint64_t>(number_field(L, table, "size", what));
  std::string crc = string_field(L, table, "crc32c", what);
  digest.crc32c = static_cast<uint32_t>(std::stoul(crc, nullptr, 16));
  return digest;
}

// A list of {name, tensor} pairs at `table`.
formats::NamedTensors read_pairs(lua_State* L, int table) {
  luaL_checktype(L, table, LUA_TTABLE);
  formats::NamedTensors out;
  size_t n = lua_objlen(L, table);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, table, static_cast<int>(i));
    if (lua_type(L, -1) != LUA_TTABLE) throw ArgError("entry " + std::to_string(i) + " is not a {name, tensor} pair");
    lua_rawgeti(L, -1, 1);
    lua_rawgeti(L, -2, 2);
    at::Tensor* t = to_tensor(L, -1);
    if (lua_type(L, -2) != LUA_TSTRING || !t) {
      throw ArgError("entry " + std::to_string(i) + " is not a {name, tensor} pair");
    }
    out.emplace_back(lua_tostring(L, -2), *t);
    lua_pop(L, 3);
  }
  return out;
}

Pushed push_tensor_map(lua_State* L, const formats::NamedTensors& tensors) {
  lua_createtable(L, 0, static_cast<int>(tensors.size()));
  for (const auto& [name, tensor] : tensors) {
    lua_pushlstring(L, name.data(), name.size());
    push_tensor(L, tensor);
    lua_rawset(L, -3);
  }
  return Pushed{1};
}

formats::Manifest read_manifest_table(lua_State* L, int table) {
  luaL_checktype(L, table, LUA_TTABLE);
  formats::Manifest m;
  m.step = static_cast<int64_t>(number_field(L, table, "step", "the manifest"));
  m.iteration = static_cast<int64_t>(number_field(L, table, "iteration", "the manifest"));
  m.world_size = static_cast<int64_t>(number_field(L, table, "world_size", "the manifest"));
  lua_getfield(L, table, "files");
  int files = lua_gettop(L);
  luaL_checktype(L, files, LUA_TTABLE);
  size_t n = lua_objlen(L, files);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, files, static_cast<int>(i));
    int entry = lua_gettop(L);
    std::string what = "manifest file entry " + std::to_string(i);
    formats::ManifestFile f;
    f.name = string_field(L, entry, "name", what);
    f.format = string_field(L, entry, "format", what);
    f.digest = read_digest(L, entry, what);
    m.files.push_back(std::move(f));
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return m;
}

namespace {

Pushed push_manifest(lua_State* L, const formats::Manifest& m) {
  lua_createtable(L, 0, 5);
  set_number_fields(L, {{"format_version", static_cast<double>(m.format_version)},
                        {"step", static_cast<double>(m.step)},
                        {"iteration", static_cast<double>(m.iteration)},
                        {"world_size", static_cast<double>(m.world_size)}});
  lua_createtable(L, static_cast<int>(m.files.size()), 0);
  for (size_t i = 0; i < m.files.size(); ++i) {
    push_digest(L, m.files[i].digest);
    lua_pushstring(L, m.files[i].name.c_str());
    lua_setfield(L, -2, "name");
    lua_pushstring(L, m.files[i].format.c_str());
    lua_setfield(L, -2, "format");
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "files");
  return Pushed{1};
}

uint64_t shard_size_option(lua_State* L, int table) {
  lua_getfield(L, table, "max_shard_size");
  uint64_t bytes = formats::WeightsOptions{}.max_shard_bytes;
  if (lua_type(L, -1) == LUA_TNUMBER) {
    // A whole number of bytes that fits: a negative, fractional, NaN or
    // huge number would otherwise convert to an arbitrary size.
    const double number = lua_tonumber(L, -1);
    if (!(number >= 0 && number < 0x1p63) || number != std::floor(number)) {
      char shown[32];
      std::snprintf(shown, sizeof shown, "%.17g", number);
      throw ArgError(std::string("max_shard_size must be a whole number of bytes from 0 to 2^63, or a size such as "
                                 "\"2GB\"; got ") + shown);
    }
    bytes = static_cast<uint64_t>(number);
  } else if (lua_type(L, -1) == LUA_TSTRING) {
    bytes = formats::parse_size(lua_tostring(L, -1));
  } else if (!lua_isnil(L, -1)) {
    throw ArgError("max_shard_size must be a size such as \"2GB\" or a number of bytes");
  }
  lua_pop(L, 1);
  return bytes;
}

// open_weights(path): a WeightsReader, closed by close() or collection.
using ReaderPtr = std::unique_ptr<formats::WeightsReader>;
std::vector<Binding> weights_reader_methods();
const HandleType kWeightsReader{"accel.WeightsReader", "WeightsReader:", weights_reader_methods};

const formats::WeightsReader& reader_at(lua_State* L) {
  const ReaderPtr& reader = check_handle<ReaderPtr>(L, 1, kWeightsReader);
  if (!reader) throw ArgError("this WeightsReader is closed");
  return *reader;
}

std::vector<Binding> weights_reader_methods() {
  return {
      bind("names", [](lua_State* L, Receiver) {
        const std::vector<std::string>& names = reader_at(L).names();
        lua_createtable(L, static_cast<int>(names.size()), 0);
        for (size_t i = 0; i < names.size(); ++i) {
          lua_pushlstring(L, names[i].data(), names[i].size());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      // info(name) -> {dtype = "float32", shape = {...}, bytes = n}
      bind("info", [](lua_State* L, Receiver, std::string name) {
        const formats::TensorEntry& entry = reader_at(L).info(name);
        lua_createtable(L, 0, 3);
        lua_pushstring(L, dtype_text(entry.dtype).c_str());
        lua_setfield(L, -2, "dtype");
        lua_createtable(L, static_cast<int>(entry.shape.size()), 0);
        for (size_t d = 0; d < entry.shape.size(); ++d) {
          lua_pushnumber(L, static_cast<lua_Number>(entry.shape[d]));
          lua_rawseti(L, -2, static_cast<int>(d + 1));
        }
        lua_setfield(L, -2, "shape");
        lua_pushnumber(L, static_cast<lua_Number>(entry.end - entry.begin));
        lua_setfield(L, -2, "bytes");
        return Pushed{1};
      }),
      // load(name[, dtype]) -> a CPU tensor of its own
      bind("load", [](lua_State* L, Receiver, std::string name, c10::optional<at::ScalarType> dtype) {
        return reader_at(L).load(name, dtype);
      }),
      // map(name[, dtype]) -> a CPU tensor over a private mapping of the
      // file, or read as load() gives it (WeightsReader::map)
      bind("map", [](lua_State* L, Receiver, std::string name, c10::optional<at::ScalarType> dtype) {
        return reader_at(L).map(name, dtype);
      }),
      bind("path", [](lua_State* L, Receiver) { return reader_at(L).path(); }),
      // close(): unmaps the files now rather than at collection.
      bind("close", [](lua_State* L, Receiver) { check_handle<ReaderPtr>(L, 1, kWeightsReader).reset(); }),
  };
}

}  // namespace

std::vector<Binding> formats_bindings() {
  return {
      // A value file's tensor elements (lua/accel/serialize.lua) as the raw
      // little-endian bytes of `stored`, and back: whole tensors in one copy,
      // not element by element through Lua tables (a 48 MiB value file took
      // 1.3 GB and 5 s that way).
      bind("value_tensor_bytes", [](const at::Tensor& t, at::ScalarType stored) {
        const at::Tensor c = t.detach().to(at::kCPU).to(stored).contiguous();
        return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel() * c.element_size()));
      }),
      // value_tensor(first, stored, numel, bytes): a 1-D tensor of `stored`
      // from bytes[first...] (1-based); the bytes must be there. The bytes
      // (a whole value file) are read where Lua keeps them, not copied.
      bind("value_tensor", [](lua_State* L, int64_t first, at::ScalarType stored, int64_t numel) {
        size_t length = 0;
        const char* bytes = lua_tolstring(L, 4, &length);
        if (!bytes) throw ArgError("value_tensor: argument 4 must be the bytes, a string");
        const int64_t size = numel * static_cast<int64_t>(c10::elementSize(stored));
        TORCH_CHECK(first >= 1 && numel >= 0 && first - 1 + size <= static_cast<int64_t>(length),
                    "a tensor of ", numel, " elements at byte ", first, " runs past the ", length, " bytes");
        at::Tensor t = at::empty({numel}, at::TensorOptions().dtype(stored));
        if (size > 0) std::memcpy(t.data_ptr(), bytes + (first - 1), static_cast<size_t>(size));
        return t;
      }),
      // write_safetensors(path, {{name, tensor}, ...}) -> digest
      bind("write_safetensors", [](lua_State* L, std::string path) {
        return push_digest(L, formats::write_safetensors(path, read_pairs(L, 2)));
      }),
      // read_safetensors(path[, expected digest]) -> {name = tensor}; with a
      // digest, a file whose size or checksum differs is refused.
      bind("read_safetensors", [](lua_State* L, std::string path) {
        formats::SafetensorsFile file = formats::read_safetensors(path);
        if (!lua_isnoneornil(L, 2)) formats::check_digest(path, read_digest(L, 2, path), file.digest);
        return push_tensor_map(L, file.tensors);
      }),
      bind("write_text", [](lua_State* L, std::string path, std::string text) {
        return push_digest(L, formats::write_whole_file(path, text));
      }),
      // read_text(path, expected digest): a file longer than the digest says
      // is refused before it is read.
      bind("read_text", [](lua_State* L, std::string path) {
        formats::FileDigest expected = read_digest(L, 2, path);
        formats::FileDigest digest;
        std::string text = formats::read_whole_file(path, expected.size, &digest);
        formats::check_digest(path, expected, digest);
        return text;
      }),
      bind("digest", [](lua_State* L, std::string path) { return push_digest(L, formats::digest_file(path)); }),
      // verify_file(path, {size, crc32c}): reads the file through (keeping
      // nothing) and raises, as every reader here does, when its size or
      // checksum is not the manifest's.
      bind("verify_file", [](lua_State* L, std::string path) {
        formats::check_digest(path, read_digest(L, 2, path), formats::digest_file(path));
      }),
      // write_manifest(folder, {step, iteration, world_size, files = {{name, format, size, crc32c}}})
      bind("write_manifest", [](lua_State* L, std::string folder) {
        formats::write_manifest(folder, read_manifest_table(L, 2));
      }),
      bind("read_manifest", [](lua_State* L, std::string folder) {
        return push_manifest(L, formats::read_manifest(folder));
      }),
      // Every listed file present with its recorded size; raises naming the first that is not.
      bind("check_file_sizes", [](std::string folder) {
        formats::check_file_sizes(folder, formats::read_manifest(folder));
      }),
      // complete(folder) -> true, or false and why not (no manifest, bad sizes).
      bind("complete", [](lua_State* L, std::string folder) {
        try {
          formats::check_file_sizes(folder, formats::read_manifest(folder));
        } catch (const formats::FormatError& e) {
          lua_pushboolean(L, 0);
          lua_pushstring(L, e.what());
          return Pushed{2};
        }
        lua_pushboolean(L, 1);
        return Pushed{1};
      }),
      bind("temporary_folder_for", [](std::string folder) { return formats::temporary_folder_for(folder); }),
      bind("make_empty_folder", [](std::string folder) { formats::make_empty_folder(folder); }),
      bind("commit_folder", [](std::string temporary, std::string folder) {
        formats::commit_folder(temporary, folder);
      }),
      bind("remove_folder", [](std::string folder) { formats::remove_folder(folder); }),
      bind("fsync", [](std::string path) { formats::fsync_path(path); }),
      // The names in a folder (none when it does not exist), sorted.
      bind("list_folder", [](lua_State* L, std::string folder) {
        std::vector<std::string> names;
        std::error_code ec;
        for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
          names.push_back(it->path().filename().string());
        }
        std::sort(names.begin(), names.end());
        lua_createtable(L, static_cast<int>(names.size()), 0);
        for (size_t i = 0; i < names.size(); ++i) {
          lua_pushstring(L, names[i].c_str());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      bind("is_folder", [](std::string path) { return fs::is_directory(path); }),
      // "missing", "file" or "other" (a FIFO, a device, a folder), found without
      // opening it: for checks of a downloaded folder that must not block.
      bind("file_kind", [](std::string path) {
        switch (outside_file_kind(path)) {
          case OutsideFileKind::Missing: return std::string("missing");
          case OutsideFileKind::Regular: return std::string("file");
          default: return std::string("other");
        }
      }),
      bind("fault_point", [](std::string point) { formats::fault_point(point.c_str()); }),
      // save_weights(folder, {{name, tensor}, ...}, {safe_serialization, max_shard_size}) -> file names
      bind("save_weights", [](lua_State* L, std::string folder) {
        formats::NamedTensors tensors = read_pairs(L, 2);
        formats::WeightsOptions options;
        if (lua_istable(L, 3)) {
          lua_getfield(L, 3, "safe_serialization");
          if (!lua_isnil(L, -1)) options.safe_serialization = lua_toboolean(L, -1) != 0;
          lua_pop(L, 1);
          options.max_shard_bytes = shard_size_option(L, 3);
        }
        std::vector<std::string> names = formats::save_weights(folder, tensors, options);
        lua_createtable(L, static_cast<int>(names.size()), 0);
        for (size_t i = 0; i < names.size(); ++i) {
          lua_pushstring(L, names[i].c_str());
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{1};
      }),
      // open_weights(path): a file (.safetensors or .bin) or a folder
      // save_weights wrote, read one tensor at a time (weights_reader.h);
      // in a warm worker, through the weights it keeps between runs.
      bind("open_weights", [](lua_State* L, std::string path) {
        push_handle(L, kWeightsReader, std::make_unique<formats::WeightsReader>(path, kept_weights()));
        return Pushed{1};
      }),
      // kept_weights() -> {kept, found, tokenizers_found}: the warm worker's
      // kept tensors, how often a run was handed one, and how often a kept
      // tokenizer (zeros in a cold worker).
      bind("kept_weights", [](lua_State* L) {
        const formats::KeptWeights* kept = kept_weights();
        const formats::KeptWeights::Counts c = kept ? kept->counts() : formats::KeptWeights::Counts{};
        const tokenizers::KeptTokenizers* tokenizers = kept_tokenizers();
        lua_createtable(L, 0, 3);
        set_number_fields(L, {{"kept", static_cast<double>(c.kept)}, {"found", static_cast<double>(c.found)},
                              {"tokenizers_found", static_cast<double>(tokenizers ? tokenizers->found() : 0)}});
        return Pushed{1};
      }),
      bind("load_weights", [](lua_State* L, std::string folder) {
        return push_tensor_map(L, formats::load_weights(folder));
      }),
      // The engine's default CPU generator (dropout, randn, randperm...) as a uint8 tensor.
      bind("generator_state", []() {
        at::Generator gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        return gen.get_state();
      }),
      bind("set_generator_state", [](const at::Tensor& state) {
        at::Generator gen = at::detail::getDefaultCPUGenerator();
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(state);
      }),
  };
}

}  // namespace accel::lua
