// How checkpoint values cross between Lua and the engine, for the bindings
// of accel.core.formats (formats_ops.cpp) and of asynchronous saves
// (async_checkpoint_ops.cpp): digests as {size = bytes, crc32c = "8 hex
// digits"}, tensors as lists of {name, tensor}, manifests as the table
// write_manifest takes.
#pragma once
#include <string>

#include "bindings/registration.h"
#include "engine/formats/file_io.h"
#include "engine/formats/manifest.h"
#include "engine/formats/safetensors.h"

namespace accel::lua {

Pushed push_digest(lua_State* L, const formats::FileDigest& digest);
std::string string_field(lua_State* L, int table, const char* key, const std::string& what);
double number_field(lua_State* L, int table, const char* key, const std::string& what);
formats::FileDigest read_digest(lua_State* L, int table, const std::string& what);
// A list of {name, tensor} pairs at `table`.
formats::NamedTensors read_pairs(lua_State* L, int table);
Pushed push_tensor_map(lua_State* L, const formats::NamedTensors& tensors);
formats::Manifest read_manifest_table(lua_State* L, int table);

}  // namespace accel::lua
