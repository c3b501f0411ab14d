// Lua called from inside LibTorch's backward: how a checkpointed Lua block
// is recomputed when backward reaches it (engine/activation_checkpoint.h).
//
// Note [Lua in backward]: a Lua state is not thread-safe. Its stack, its
// collector and the C frames of its calls belong to one thread at a time,
// and Lua may only be called where it expects a call: from Lua, or from a C
// function Lua called. Autograd runs a graph's nodes on the thread that
// called backward when they are on the CPU, on a GPU's worker thread when
// their gradients are on that GPU, and on a pool thread past 60 nested
// backward passes. So a recomputation may run on any of those threads, and
// it enters Lua by these rules:
//   - Only the state lent to autograd is entered: the `backward` binding
//     (bindings/autograd_ops.cpp) lends the state that called it for as long
//     as autograd's pass runs (LentToBackward). That thread is blocked in a C
//     function all that time, running no Lua: its Lua stack stays as it was
//     at the backward call, and a call on top of it is what any C function
//     calling back into Lua makes.
//   - One thread at a time: a mutex admits the thread that runs the
//     recomputation, the recipe's own or an autograd worker, and is held
//     only while Lua runs. The nested pass that takes the block's gradients
//     starts after the Lua call has returned, so a block inside a block, or
//     one on another thread, never waits for a thread that waits for it. A
//     block that calls backward itself lends the state again and hands the
//     mutex over while that backward runs.
//   - Errors: the call is protected (lua_pcall) on the thread that makes it,
//     so a Lua error unwinds only that call's frames, on that thread's stack,
//     and becomes a C++ exception there. Autograd carries it to the thread
//     blocked in backward, whose error boundary (error_boundary.h) raises it
//     as an ordinary Lua error at the recipe's backward line, with the
//     block's own message, which names the block's failing line.
//   - Lifetimes: a node holds its block through a registry reference, and
//     autograd frees nodes on any thread at any time. A dropped reference is
//     queued with its state and freed by the next accel.checkpoint call, on
//     the thread running that state's Lua; once the state is closed its queue
//     takes nothing, so a node outliving its state touches no Lua.
// tests/lua/test_checkpoint_activations.lua makes autograd recompute blocks on
// a pool thread (64 nested checkpoints) and checks that they ran there, with
// the gradients of no checkpoints and an error naming the block's line;
// tests/gpu/checkpoint.lua does the same on a GPU's worker thread.
#pragma once

extern "C" {
#include <lua.h>
}

#include <functional>
#include <memory>

namespace accel::lua {

// Lends L to autograd while it lives: the calling thread is blocked in a
// backward pass until then (see the note).
class LentToBackward {
 public:
  explicit LentToBackward(lua_State* L);
  ~LentToBackward();
  LentToBackward(const LentToBackward&) = delete;
  LentToBackward& operator=(const LentToBackward&) = delete;

 private:
  bool handed_over_;  // this thread was running a recomputation: it lets others in meanwhile
};

struct StateLink;

// A Lua value kept for autograd, released safely from any thread.
class LuaReference {
 public:
  // Takes (and pops) the value on top of L's stack.
  explicit LuaReference(lua_State* L);
  ~LuaReference();
  LuaReference(const LuaReference&) = delete;
  LuaReference& operator=(const LuaReference&) = delete;

  // Runs body(L, value index) on the state lent to the backward under way,
  // with the value pushed, one thread at a time; L's stack is as before
  // afterwards. Throws when no backward lent this value's state.
  void call_in_backward(const std::function<void(lua_State*, int)>& body) const;

 private:
  std::shared_ptr<StateLink> link_;
  int ref_;
};

// Frees the references autograd has dropped since the last call; on the
// thread running L's Lua.
void release_dropped_references(lua_State* L);

}  // namespace accel::lua
