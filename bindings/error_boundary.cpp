#include "bindings/error_boundary.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <sstream>

#include "bindings/error_log.h"
#include "bindings/tensor_handle.h"
#include "engine/comm/communicator.h"
#include "engine/utf8/utf8.h"
#include "engine/tensor_description.h"

namespace accel::lua {
namespace {

// LibTorch reports a bad dim 0-based ("expected to be in range of [-2, 1],
// but got 4"); the user wrote it 1-based, so say it their way.
std::string with_one_based_dims(const std::string& message) {
  const char* found = std::strstr(message.c_str(), "Dimension out of range (expected to be in range of [");
  long long low = 0, high = 0, got = 0;
  if (!found || std::sscanf(found, "Dimension out of range (expected to be in range of [%lld, %lld], but got %lld)",
                            &low, &high, &got) != 3) {
    return message;
  }
  long long dims = high + 1;
  std::ostringstream out;
  out << "dim " << (got >= 0 ? got + 1 : got) << " is out of range for a tensor with " << dims
      << (dims == 1 ? " dim" : " dims") << " (dims are 1-based: 1 to " << dims << ", or " << -dims
      << " to -1 from the end)";
  return out.str();
}

// Describes the call's arguments so shape errors always show the shapes.
std::string describe_arguments(lua_State* L) {
  std::ostringstream out;
  int top = lua_gettop(L);
  for (int i = 1; i <= top; ++i) {
    if (i > 1) out << ", ";
    if (at::Tensor* t = to_tensor(L, i)) {
      if (!t->defined()) {
        out << "undefined tensor";
        continue;
      }
      out << describe_tensor(*t);
    } else if (lua_type(L, i) == LUA_TNUMBER) {
      out << lua_tonumber(L, i);
    } else if (lua_type(L, i) == LUA_TSTRING) {
      size_t length = 0;
      const char* text = lua_tolstring(L, i, &length);
      // A string from a file is not printed back raw (engine/utf8/utf8.h).
      out << utf8::quoted_for_message(std::string_view(text, length));
    } else {
      out << type_name_at(L, i);
    }
  }
  return out.str();
}

std::string& library_source_prefix() {
  static std::string prefix;
  return prefix;
}

}  // namespace

std::string describe_exception(const std::exception& e) {
  if (dynamic_cast<const CollectiveError*>(&e)) on_collective_failure(e.what());
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) {
    log_cpp_backtrace(torch_error->what());
    return utf8::escape_invalid(with_one_based_dims(torch_error->what_without_backtrace()));
  }
  // A message quoting what a file held (a path, a token, a name) shows a
  // byte that is not UTF-8 as \xNN, never raw.
  return utf8::escape_invalid(e.what());
}

void set_library_source_prefix(const std::string& lua_dir) {
  library_source_prefix() = "@" + lua_dir;
}

void push_caller_location(lua_State* L) {
  const std::string& library = library_source_prefix();
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); ++level) {
    lua_getinfo(L, "Sl", &ar);
    if (ar.currentline <= 0) continue;  // a C function
    if (!library.empty() && std::strncmp(ar.source, library.data(), library.size()) == 0) continue;
    lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
    return;
  }
  luaL_where(L, 1);
}

void push_error(lua_State* L, const char* name, const std::string& message) {
  // A message that already begins with the binding's name (the engine's
  // own, e.g. "accel.cuda.empty_cache: no GPU here") keeps it once.
  const std::string named = std::string(name) + ": ";
  std::string text = message.rfind(named, 0) == 0 ? message : named + message;
  // LibTorch messages often end in a newline; keep the Lua message tidy.
  while (!text.empty() && text.back() == '\n') text.pop_back();
  if (lua_gettop(L) > 0) text += " (called with: " + describe_arguments(L) + ")";
  push_caller_location(L);
  lua_pushlstring(L, text.data(), text.size());
  lua_concat(L, 2);
}

}  // namespace accel::lua
