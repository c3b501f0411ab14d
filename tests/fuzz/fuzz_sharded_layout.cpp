// Feeds the input to the reader of a SHARDED_STATE_DICT layout
// (model_sharding.lua in a checkpoint): accel.serialize.load, then
// tp_slices.check_layout (the same value as a mesh_layout.lua) and
// sharded_state.check_layout; a layout it passes, when small enough to
// build (at most a million elements in all), is used as a load uses it: the
// full model and optimizer state are rebuilt from every rank's slices
// (zeros of the layout's shard sizes). The code is Lua: lua_harness.h gives
// libFuzzer its coverage.
// Finding: an error that is not the decoder's ("accel.serialize: ...") or
// the layout checks' ("'model_sharding.lua': ...", "'mesh_layout.lua'..."), a rebuild that fails
// for a layout the check passed, a crash, a sanitizer report, a hang or a
// leak.
#include <cstring>
#include <string>

#include "tests/fuzz/lua_harness.h"

namespace {

constexpr const char* kTarget = "fuzz_sharded_layout";

// fuzz.layout(bytes): nil when the layout is refused as it should be, or a
// string saying what went wrong otherwise.
constexpr const char* kSetup = R"(
local serialize = require('accel.serialize')
local sharded_state = require('accel.parallel.checkpoint.flat_shards')
local tp_slices = require('accel.parallel.checkpoint.tp_slices')
local core = require('accel.core')
local path = 'model_sharding.lua'
debug.getregistry()['fuzz.layout'] = function(bytes)
  local ok, layout = pcall(serialize.load, bytes, path)
  if not ok then
    if tostring(layout):find('^accel%.serialize: ') then return nil end
    return 'load raised an error that is not the decoder\'s: ' .. tostring(layout)
  end
  -- The same value as a mesh layout (mesh_layout.lua): refused naming it, or passed.
  local mesh_checked, mesh_why = pcall(tp_slices.check_layout, layout, 'mesh_layout.lua')
  if not mesh_checked and not tostring(mesh_why):find("^'mesh_layout%.lua'") then
    return 'tp_slices.check_layout raised an error that is not its own: ' .. tostring(mesh_why)
  end
  local checked, why = pcall(sharded_state.check_layout, layout, path)
  if not checked then
    if tostring(why):find("^'model_sharding%.lua': ") then return nil end
    return 'check_layout raised an error that is not its own: ' .. tostring(why)
  end
  local elements = 0
  for _, flat in ipairs(layout.flats) do elements = elements + flat.shard_numel * layout.world_size end
  if elements > 1e6 or layout.world_size > 64 then return nil end
  local models, optimizers = {}, {}
  for r = 1, layout.world_size do
    models[r], optimizers[r] = {}, {}
    for k, flat in ipairs(layout.flats) do models[r]['flat_' .. k] = core.zeros({ flat.shard_numel }) end
  end
  local built, err = pcall(sharded_state.full_model, layout, models, path)
  if not built then return 'full_model refused a layout check_layout passed: ' .. tostring(err) end
  built, err = pcall(sharded_state.full_optimizer, layout, optimizers, path)
  if not built then return 'full_optimizer refused a layout check_layout passed: ' .. tostring(err) end
  return nil
end
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = accel::fuzz::new_lua_state(kTarget, kSetup);
  return accel::fuzz::check_input(L, kTarget, "fuzz.layout", data, size);
}
