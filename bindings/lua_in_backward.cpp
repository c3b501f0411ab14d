#include "bindings/lua_in_backward.h"

extern "C" {
#include <lauxlib.h>
}

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace accel::lua {

// One per Lua state that kept values for autograd: the references dropped
// since its Lua last ran, and whether it is closed.
struct StateLink {
  std::mutex mutex;
  bool closed = false;
  std::vector<int> dropped;
};

namespace {

// The states lent to autograd (innermost last) and the one thread running
// Lua on them. Note [Lua in backward].
struct Gate {
  std::mutex entry;  // held while a thread runs Lua on a lent state
  std::atomic<std::thread::id> runner{};
  std::mutex lent_mutex;
  std::vector<lua_State*> lent;
};

Gate& gate() {
  static Gate instance;
  return instance;
}

const char kLinkKey = 0;  // its address is the registry key of a state's link

int close_link(lua_State* L) {
  auto* link = static_cast<std::shared_ptr<StateLink>*>(lua_touserdata(L, 1));
  {
    std::lock_guard<std::mutex> lock((*link)->mutex);
    (*link)->closed = true;
    (*link)->dropped.clear();
  }
  link->~shared_ptr();
  return 0;
}

// L's link, made on first use (create) or nullptr.
std::shared_ptr<StateLink> link_of(lua_State* L, bool create) {
  lua_pushlightuserdata(L, const_cast<char*>(&kLinkKey));
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (auto* link = static_cast<std::shared_ptr<StateLink>*>(lua_touserdata(L, -1))) {
    std::shared_ptr<StateLink> out = *link;
    lua_pop(L, 1);
    return out;
  }
  lua_pop(L, 1);
  if (!create) return nullptr;
  lua_pushlightuserdata(L, const_cast<char*>(&kLinkKey));
  void* memory = lua_newuserdata(L, sizeof(std::shared_ptr<StateLink>));
  auto* link = new (memory) std::shared_ptr<StateLink>(std::make_shared<StateLink>());
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, close_link);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return *link;
}

}  // namespace

LentToBackward::LentToBackward(lua_State* L) {
  Gate& g = gate();
  handed_over_ = g.runner.load() == std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> lock(g.lent_mutex);
    g.lent.push_back(L);
  }
  if (handed_over_) {
    g.runner.store(std::thread::id());
    g.entry.unlock();
  }
}

LentToBackward::~LentToBackward() {
  Gate& g = gate();
  if (handed_over_) {
    g.entry.lock();
    g.runner.store(std::this_thread::get_id());
  }
  std::lock_guard<std::mutex> lock(g.lent_mutex);
  g.lent.pop_back();
}

LuaReference::LuaReference(lua_State* L) : link_(link_of(L, true)), ref_(luaL_ref(L, LUA_REGISTRYINDEX)) {}

LuaReference::~LuaReference() {
  std::lock_guard<std::mutex> lock(link_->mutex);
  if (!link_->closed) link_->dropped.push_back(ref_);
}

void LuaReference::call_in_backward(const std::function<void(lua_State*, int)>& body) const {
  Gate& g = gate();
  std::lock_guard<std::mutex> entered(g.entry);
  g.runner.store(std::this_thread::get_id());
  struct Leave {
    Gate& g;
    ~Leave() { g.runner.store(std::thread::id()); }
  } leave{g};
  lua_State* L = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.lent_mutex);
    if (!g.lent.empty()) L = g.lent.back();
  }
  // Only through accel's backward, on the state that made the value: a
  // pass nobody lent a state for has no thread blocked for it.
  if (!L || link_of(L, false) != link_) {
    throw std::runtime_error(
        "accel.checkpoint: backward reached a checkpointed block outside a backward of the Lua state that made it");
  }
  const int top = lua_gettop(L);
  struct Restore {
    lua_State* L;
    int top;
    ~Restore() { lua_settop(L, top); }
  } restore{L, top};
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref_);
  body(L, lua_gettop(L));
}

void release_dropped_references(lua_State* L) {
  std::shared_ptr<StateLink> link = link_of(L, false);
  if (!link) return;
  std::vector<int> dropped;
  {
    std::lock_guard<std::mutex> lock(link->mutex);
    dropped.swap(link->dropped);
  }
  for (int ref : dropped) luaL_unref(L, LUA_REGISTRYINDEX, ref);
}

}  // namespace accel::lua
