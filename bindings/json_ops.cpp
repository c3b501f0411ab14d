// accel.core.json: JSON files as Lua tables, for the Hugging Face folders
// recipes start from (config.json, generation_config.json, adapter_config.json,
// tokenizer.json) and the ones save_pretrained writes. Parsing is the
// engine's strict reader (engine/json/json_reader.h: RFC 8259 only, a size
// cap, bounded depth, no repeated keys); nothing read is ever executed.
//   read(path [, max_bytes]) -> table, floats   a file holding one JSON object
//   decode(text, source [, max_bytes])          the same from a string
//   encode(table [, floats]) -> text            indent 2, keys sorted, as
//                                               transformers' to_json_string
// Lua has one number type, but readers of these files tell 0.0 from 0
// (transformers 5 refuses an integer where its config declares a float):
// `floats` is the set of object keys ({factor = true}) whose values were
// written as decimals, and encode writes numbers under those keys as
// decimals again.
// JSON null reads as accel.core.json.null (a light userdata), so a reader
// can tell "null" from "absent"; encode writes it back as null. A Lua table
// whose keys are exactly 1..n (n > 0) is an array, any other an object.
#include <cmath>
#include <cstdint>
#include <string>

#include "bindings/lua_support.h"
#include "bindings/op_tables.h"
#include "engine/files/outside_file.h"
#include "engine/json/json_reader.h"

namespace accel::lua {
namespace {

using nlohmann::json;

// The sentinel pushed for null: its address, unique in the process.
char null_sentinel;

// Larger than any config; tokenizer.json files of big vocabularies reach tens of MiB.
constexpr uint64_t kDefaultMaxBytes = uint64_t{256} << 20;

// `floats`: the stack index of the table collecting keys of decimal values.
void push_json(lua_State* L, const json& value, int floats) {
  luaL_checkstack(L, 4, "JSON nesting");
  switch (value.type()) {
    case json::value_t::null:
      lua_pushlightuserdata(L, &null_sentinel);
      return;
    case json::value_t::boolean:
      lua_pushboolean(L, value.get<bool>());
      return;
    case json::value_t::number_integer:
      lua_pushnumber(L, static_cast<double>(value.get<int64_t>()));
      return;
    case json::value_t::number_unsigned:
      lua_pushnumber(L, static_cast<double>(value.get<uint64_t>()));
      return;
    case json::value_t::number_float:
      lua_pushnumber(L, value.get<double>());
      return;
    case json::value_t::string: {
      const auto& s = value.get_ref<const std::string&>();
      lua_pushlstring(L, s.data(), s.size());
      return;
    }
    case json::value_t::array: {
      lua_createtable(L, static_cast<int>(value.size()), 0);
      int i = 0;
      for (const auto& item : value) {
        push_json(L, item, floats);
        lua_rawseti(L, -2, ++i);
      }
      return;
    }
    case json::value_t::object: {
      lua_createtable(L, 0, static_cast<int>(value.size()));
      for (const auto& [key, item] : value.items()) {
        lua_pushlstring(L, key.data(), key.size());
        push_json(L, item, floats);
        lua_rawset(L, -3);
        if (item.is_number_float()) {
          lua_pushlstring(L, key.data(), key.size());
          lua_pushboolean(L, 1);
          lua_rawset(L, floats);
        }
      }
      return;
    }
    default:
      throw ArgError("JSON value of an unsupported kind");
  }
}

// `path` names the value for errors: "config.rope_scaling.factor"; `floats`
// is the stack index of the set of keys written as decimals (0: none), and
// `decimal` says this value's key is one.
json to_json(lua_State* L, int index, const std::string& path, int depth, int floats, bool decimal) {
  if (depth > strict_json::kMaxJsonDepth) throw ArgError(path + " nests deeper than " +
                                                  std::to_string(strict_json::kMaxJsonDepth) + " levels");
  if (index < 0) index = lua_gettop(L) + index + 1;  // Lua 5.1 has no lua_absindex
  switch (lua_type(L, index)) {
    case LUA_TBOOLEAN:
      return json(lua_toboolean(L, index) != 0);
    case LUA_TNUMBER: {
      const double n = lua_tonumber(L, index);
      if (!std::isfinite(n)) throw ArgError(path + " is " + std::to_string(n) + ", which JSON cannot hold");
      if (!decimal && n == std::floor(n) && std::fabs(n) < 0x1p53) return json(static_cast<int64_t>(n));
      return json(n);
    }
    case LUA_TSTRING: {
      size_t length = 0;
      const char* s = lua_tolstring(L, index, &length);
      return json(strict_json::json_utf8(std::string(s, length), path));
    }
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, index) == &null_sentinel) return json(nullptr);
      break;
    case LUA_TTABLE: {
      const size_t n = lua_objlen(L, index);
      size_t keys = 0;
      lua_pushnil(L);
      while (lua_next(L, index) != 0) {
        ++keys;
        lua_pop(L, 1);
      }
      if (n > 0 && keys == n) {
        json array = json::array();
        for (size_t i = 1; i <= n; ++i) {
          lua_rawgeti(L, index, static_cast<int>(i));
          array.push_back(to_json(L, -1, path + "[" + std::to_string(i) + "]", depth + 1, floats, decimal));
          lua_pop(L, 1);
        }
        return array;
      }
      json object = json::object();
      lua_pushnil(L);
      while (lua_next(L, index) != 0) {
        if (lua_type(L, -2) != LUA_TSTRING) {
          throw ArgError(path + " mixes " + (n > 0 ? "array items and " : "") + "a key of type " +
                         luaL_typename(L, -2) + "; a JSON object's keys are strings");
        }
        std::string key = lua_tostring(L, -2);
        bool key_decimal = false;
        if (floats != 0) {
          lua_pushvalue(L, -2);
          lua_rawget(L, floats);
          key_decimal = lua_toboolean(L, -1) != 0;
          lua_pop(L, 1);
        }
        object[key] = to_json(L, -1, path + "." + key, depth + 1, floats, key_decimal);
        lua_pop(L, 1);
      }
      return object;
    }
    default:
      break;
  }
  throw ArgError(path + " is a " + luaL_typename(L, index) + ", which JSON cannot hold");
}

uint64_t max_bytes_of(c10::optional<double> max_bytes) {
  if (!max_bytes) return kDefaultMaxBytes;
  if (!(*max_bytes >= 0 && *max_bytes < 0x1p63)) throw ArgError("max_bytes must be a non-negative number of bytes");
  return static_cast<uint64_t>(*max_bytes);
}

}  // namespace

std::vector<Binding> json_bindings() {
  return {
      bind("read", [](lua_State* L, std::string path, c10::optional<double> max_bytes) {
        const uint64_t limit = max_bytes_of(max_bytes);
        const json value = strict_json::parse_json(read_outside_file(path, limit), path, limit);
        lua_newtable(L);
        const int floats = lua_gettop(L);
        push_json(L, value, floats);
        lua_insert(L, floats);
        return Pushed{2};
      }),
      bind("decode", [](lua_State* L, std::string text, std::string source, c10::optional<double> max_bytes) {
        const json value = strict_json::parse_json(text, source, max_bytes_of(max_bytes));
        lua_newtable(L);
        const int floats = lua_gettop(L);
        push_json(L, value, floats);
        lua_insert(L, floats);
        return Pushed{2};
      }),
      // The value is argument 1, read here: any Lua value may be given.
      bind("encode", [](lua_State* L, Receiver, c10::optional<Options> floats) {
        if (floats && floats->index == 0) floats.reset();
        return to_json(L, 1, "the value", 0, floats ? floats->index : 0, false).dump(2) + "\n";
      }),
  };
}

// accel.core.json.null, set beside the functions.
void push_json_null(lua_State* L) { lua_pushlightuserdata(L, &null_sentinel); }

}  // namespace accel::lua
