// accel.core.chat_template: chat templates (engine/chat_template/) for
// lua/accel/tokenizers/chat_template.lua, which settles transformers'
// options and gives here the variables a template sees.
//   compile(source, origin) -> template        origin names it in errors
//   template:render(variables, {max_output_bytes, max_steps, max_call_depth})
//     -> text, {{begin, end}...}               the generation blocks' spans:
//                                              0-based byte offsets, end excluded
// Lua values become template values here: strings (valid UTF-8 only),
// numbers (integral ones as Python ints), booleans, accel.core.json.null as
// None, a table whose keys are 1..n (or an empty one) as a list, any other
// with string keys as a dict in sorted key order (Lua tables have none).
#include <algorithm>
#include <cmath>
#include <ctime>
#include <memory>

#include "bindings/lua_support.h"
#include "bindings/op_tables.h"
#include "engine/chat_template/chat_template.h"
#include "engine/utf8/utf8.h"

namespace accel::lua {
namespace {

namespace ct = accel::chat_template;

using TemplatePtr = std::shared_ptr<const ct::ChatTemplate>;

std::vector<Binding> template_methods();
const HandleType kChatTemplate{"accel.ChatTemplate", "accel.tokenizers.ChatTemplate:", template_methods};

// Deeper than any conversation or tool schema; a table holding itself stops here.
constexpr int kMaxDepth = 64;

std::string lua_text(lua_State* L, int idx, const std::string& path) {
  std::size_t size = 0;
  const char* s = lua_tolstring(L, idx, &size);
  std::string text(s, size);
  const std::size_t bad = utf8::first_invalid(text);
  if (bad != std::string::npos) throw ArgError(path + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  return text;
}

ct::Value to_value(lua_State* L, int idx, const std::string& path, int depth, const void* null);

ct::Value table_value(lua_State* L, int idx, const std::string& path, int depth, const void* null) {
  if (depth > kMaxDepth) throw ArgError(path + " nests deeper than " + std::to_string(kMaxDepth) + " tables");
  const std::size_t n = lua_objlen(L, idx);
  std::size_t count = 0;
  bool strings_only = true;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    ++count;
    strings_only &= lua_type(L, -2) == LUA_TSTRING;
    lua_pop(L, 1);
  }
  if (count == n) {  // 1..n, or empty: a list
    ct::List list;
    list.reserve(n);
    for (std::size_t i = 1; i <= n; ++i) {
      lua_rawgeti(L, idx, static_cast<int>(i));
      list.push_back(to_value(L, lua_gettop(L), path + "[" + std::to_string(i) + "]", depth + 1, null));
      lua_pop(L, 1);
    }
    return ct::Value(std::move(list));
  }
  if (!strings_only) throw ArgError(path + " mixes list items and other keys, or has keys that are not strings");
  std::vector<std::string> keys;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    lua_pop(L, 1);
    keys.push_back(lua_text(L, -1, path + " key"));
  }
  std::sort(keys.begin(), keys.end());
  ct::Dict dict;
  for (const std::string& key : keys) {
    lua_getfield(L, idx, key.c_str());
    dict.items.emplace_back(key, to_value(L, lua_gettop(L), path + "." + key, depth + 1, null));
    lua_pop(L, 1);
  }
  return ct::Value(std::move(dict));
}

ct::Value to_value(lua_State* L, int idx, const std::string& path, int depth, const void* null) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL:
      return ct::Value::none();
    case LUA_TBOOLEAN:
      return ct::Value(lua_toboolean(L, idx) != 0);
    case LUA_TNUMBER: {
      const double v = lua_tonumber(L, idx);
      if (v == static_cast<double>(static_cast<int64_t>(v)) && std::abs(v) < 9007199254740992.0) {
        return ct::Value(static_cast<int64_t>(v));
      }
      return ct::Value(v);
    }
    case LUA_TSTRING:
      return ct::Value(lua_text(L, idx, path));
    case LUA_TLIGHTUSERDATA:
      if (lua_touserdata(L, idx) == null) return ct::Value::none();
      break;
    case LUA_TTABLE:
      return table_value(L, idx, path, depth, null);
    default:
      break;
  }
  throw ArgError(path + " is a " + type_name_at(L, idx) + ": a template takes strings, numbers, booleans, " +
                 "accel.core.json.null and tables of them");
}

// accel.core.json.null's address, to read it as None.
const void* json_null(lua_State* L) {
  push_json_null(L);
  const void* p = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return p;
}

std::vector<Binding> template_methods() {
  return {
      bind("render", [](lua_State* L, Receiver, Receiver, c10::optional<Options> options) {
        const ct::ChatTemplate& t = *check_handle<TemplatePtr>(L, 1, kChatTemplate);
        if (lua_type(L, 2) != LUA_TTABLE) throw ArgError("variables must be a table");
        const ct::Value variables = table_value(L, 2, "variables", 0, json_null(L));
        if (!variables.is_dict() && !variables.as_list().empty()) throw ArgError("variables must be a table of names");
        const Options o = options.value_or(Options{});
        ct::Limits limits;
        limits.max_output_bytes = static_cast<std::size_t>(
            option_integer(L, o, "max_output_bytes", static_cast<int64_t>(limits.max_output_bytes)));
        limits.max_steps = static_cast<uint64_t>(option_integer(L, o, "max_steps", static_cast<int64_t>(limits.max_steps)));
        limits.max_call_depth = static_cast<int>(option_integer(L, o, "max_call_depth", limits.max_call_depth));
        const ct::Rendered r = t.render(variables.is_dict() ? variables.as_dict() : ct::Dict{}, limits,
                                        static_cast<int64_t>(std::time(nullptr)));
        lua_pushlstring(L, r.text.data(), r.text.size());
        lua_createtable(L, static_cast<int>(r.generation_spans.size()), 0);
        for (std::size_t i = 0; i < r.generation_spans.size(); ++i) {
          lua_createtable(L, 2, 0);
          lua_pushnumber(L, static_cast<double>(r.generation_spans[i].first));
          lua_rawseti(L, -2, 1);
          lua_pushnumber(L, static_cast<double>(r.generation_spans[i].second));
          lua_rawseti(L, -2, 2);
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        }
        return Pushed{2};
      }),
  };
}

}  // namespace

std::vector<Binding> chat_template_bindings() {
  return {
      bind("compile", [](lua_State* L, std::string source, std::string origin) {
        push_handle(L, kChatTemplate, TemplatePtr(std::make_shared<const ct::ChatTemplate>(source, origin)));
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
