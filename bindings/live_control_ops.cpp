// accel.core.live: the worker's end of a live run's control channel (the
// launcher's is engine/launch/live_control_server.h): a connection of its
// own to the run's store, through which lua/accel/live/control.lua reads
// the chunks posted (engine/protocol/live_control_keys.h), agrees with the
// other ranks on the step they run at and on their success, and publishes
// its status. Apart from the communicator's, so that neither waits for the
// other.
#include <chrono>
#include <memory>
#include <thread>

#include "bindings/distributed_ops.h"
#include "bindings/op_tables.h"
#include "bindings/typed_userdata.h"
#include "engine/process_state.h"
#include "engine/protocol/store_connection.h"

namespace accel::lua {
namespace {

using StorePtr = std::unique_ptr<StoreConnection>;
using std::chrono::milliseconds;

std::vector<Binding> store_methods();
const HandleType kStore{"accel.LiveStore", "LiveStore:", store_methods};

StoreConnection& store_at(lua_State* L) { return *check_handle<StorePtr>(L, 1, kStore); }

std::vector<Binding> store_methods() {
  return {
      // get(key): the value, or nil when the key does not exist.
      bind("get", [](lua_State* L, Receiver, std::string key) {
        std::optional<std::string> value = store_at(L).get(key);
        if (value) lua_pushlstring(L, value->data(), value->size());
        else lua_pushnil(L);
        return Pushed{1};
      }),
      bind("set", [](lua_State* L, Receiver, std::string key, std::string value) { store_at(L).set(key, value); }),
      // wait_ranks(prefix, n, timeout_ms): whether prefix..0 to prefix..(n-1)
      // all exist within the timeout.
      bind("wait_ranks", [](lua_State* L, Receiver, std::string prefix, int64_t n, int64_t timeout_ms) {
        std::vector<std::string> keys;
        for (int64_t r = 0; r < n; ++r) keys.push_back(prefix + std::to_string(r));
        return store_at(L).wait(keys, milliseconds(timeout_ms)).empty();
      }),
  };
}

}  // namespace

std::vector<Binding> live_control_bindings() {
  return {
      // sleep(seconds): a paused rank's wait between looks at the store.
      bind("sleep", [](double seconds) {
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
      }),
      // connect(): this rank's connection to the launcher's store, or nil
      // when the run has none (a worker started without accel-run, or by
      // mpirun).
      bind("connect", [](lua_State* L) {
        const ProcessState& state = dist_process_state(L);
        if (state.master_port <= 0 || state.rdzv_token.empty()) {
          lua_pushnil(L);
          return Pushed{1};
        }
        auto connection = std::make_unique<StoreConnection>(
            state.store_address(), std::chrono::steady_clock::now() + milliseconds(5000));
        push_handle(L, kStore, std::move(connection));
        return Pushed{1};
      }),
  };
}

}  // namespace accel::lua
