// Feeds the input, as a downloaded folder's config.json, to what
// accel.models.from_pretrained does with it before a weight is read:
// config.read (strict JSON, nulls), the architecture by model_type, the
// sizes compared with the checkpoint beside it (checkpoint_sizes: a fixed
// folder whose weights hold 2 layers and 2 experts, names only), and the
// model built on the meta device (init_empty_weights) from every field the
// architecture reads. The code is Lua: lua_harness.h gives libFuzzer its
// coverage.
// Finding: an error from the config's reading or checks that does not name
// config.json; a Lua error of the code itself (indexing or arithmetic on
// nil, a bad argument to a Lua function) while the model is built from a
// config the checks passed; a crash, a sanitizer report, a hang or a leak.
#include <string>

#include "tests/fuzz/lua_harness.h"

namespace {

constexpr const char* kTarget = "fuzz_model_config";

// fuzz.model_config(bytes): nil when the config is refused or built as it
// should be, or a string saying what went wrong.
constexpr const char* kSetup = R"(
local core = require('accel.core')
local config = require('accel.models.config')
local architectures = require('accel.models.architectures')
local checkpoint_sizes = require('accel.models.checkpoint_sizes')
local init_empty_weights = require('accel.big_modeling.init_empty_weights')
local dir = os.tmpname()
os.remove(dir)
core.formats.make_empty_folder(dir)
local names = { 'model.embed_tokens.weight', 'model.layers.0.mlp.experts.0.w1.weight',
                'model.layers.1.mlp.experts.1.w1.weight', 'transformer.h.0.attn.c_attn.weight',
                'transformer.h.1.attn.c_attn.weight' }
local tensors = {}
for i, name in ipairs(names) do tensors[i] = { name, core.zeros({ 1 }) } end
core.formats.write_safetensors(dir .. '/model.safetensors', tensors)
local function named(ok, err)
  if ok or tostring(err):find('config.json', 1, true) then return nil end
  return 'an error that does not name config.json: ' .. tostring(err)
end
-- Errors of Lua itself, not of a check: the code tripped over a value.
local LUA_ERRORS = { 'attempt to ', 'bad argument #', 'stack overflow', 'table index is' }
debug.getregistry()['fuzz.model_config'] = function(bytes)
  local f = assert(io.open(dir .. '/config.json', 'wb'))
  f:write(bytes)
  f:close()
  local ok, cfg = pcall(config.read, dir)
  if not ok then return named(ok, cfg) end
  local found, cls = pcall(architectures.of, cfg)
  if not found then return named(found, cls) end
  local checked, why = pcall(checkpoint_sizes.check, cfg, dir)
  if not checked then return named(checked, why) end
  local built, err = pcall(init_empty_weights, function() return cls(cfg) end)
  if not built then
    for _, words in ipairs(LUA_ERRORS) do
      if tostring(err):find(words, 1, true) then return 'building the model failed in Lua: ' .. tostring(err) end
    end
  end
  return nil
end
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = accel::fuzz::new_lua_state(kTarget, kSetup);
  return accel::fuzz::check_input(L, kTarget, "fuzz.model_config", data, size);
}
