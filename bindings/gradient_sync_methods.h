// The methods of the gradient-synchronisation seam
// (engine/parallel/gradient_sync.h), bound once for every handle type that
// implements it, so that Lua drives a data-parallel reducer and a sharded
// model through the same calls: sync:set_sync(flag), sync:sync(),
// sync:caller_finishes_backward(), sync:end_backward(),
// sync:finalize([num_items]).
#pragma once
#include <vector>

#include "bindings/registration.h"
#include "engine/parallel/gradient_sync.h"

namespace accel::lua {

// `At` returns the implementation held by the handle at argument 1.
template <GradientSync& (*At)(lua_State*)>
std::vector<Binding> gradient_sync_methods() {
  return {
      bind("set_sync", [](lua_State* L, Receiver, bool sync) { At(L).set_sync(sync); }),
      bind("sync", [](lua_State* L, Receiver) { return At(L).sync(); }),
      bind("caller_finishes_backward", [](lua_State* L, Receiver) { At(L).caller_finishes_backward(); }),
      bind("end_backward", [](lua_State* L, Receiver) { At(L).end_backward(); }),
      // finalize([num_items]): this rank's items since the last synchronisation.
      bind("finalize", [](lua_State* L, Receiver, c10::optional<int64_t> num_items) {
        At(L).finalize(num_items.value_or(0));
      }),
  };
}

}  // namespace accel::lua
