// Feeds the input, as a downloaded folder's JSON configs, to their readers:
// generation_config.json to accel.models' generation_config.read (every
// field generate reads checked), adapter_config.json to accel.peft's
// adapter_config.read (LoraConfig's options), and tokenizer_config.json to
// the special tokens' reader and to the call defaults' (call_defaults.read:
// model_max_length, the sides). The code is Lua:
// lua_harness.h gives libFuzzer its coverage.
// Finding: an error that does not name the file it read, a value a reader
// passed that generate would trip over (a generation field of the wrong
// type), a crash, a sanitizer report, a hang or a leak.
#include <string>

#include "tests/fuzz/lua_harness.h"

namespace {

constexpr const char* kTarget = "fuzz_download_configs";

// fuzz.configs(bytes): nil when every reader accepts or refuses as it
// should, or a string saying what went wrong.
constexpr const char* kSetup = R"(
local core = require('accel.core')
local generation_config = require('accel.models.generation_config')
local adapter_config = require('accel.peft.adapter_config')
local special_tokens = require('accel.tokenizers.special_tokens')
local call_defaults = require('accel.tokenizers.call_defaults')
local dir = os.tmpname()
os.remove(dir)
core.formats.make_empty_folder(dir)
local function write(name, bytes)
  local f = assert(io.open(dir .. '/' .. name, 'wb'))
  f:write(bytes)
  f:close()
  return dir .. '/' .. name
end
local function named(ok, err, file)
  if ok or tostring(err):find(file, 1, true) then return nil end
  return 'an error that does not name ' .. file .. ': ' .. tostring(err)
end
local kinds = { do_sample = 'boolean', temperature = 'number', top_k = 'number', top_p = 'number',
                repetition_penalty = 'number', max_new_tokens = 'number', min_new_tokens = 'number' }
debug.getregistry()['fuzz.configs'] = function(bytes)
  local path = write('generation_config.json', bytes)
  local ok, g = pcall(generation_config.read, path)
  local problem = named(ok, g, 'generation_config.json')
  if problem then return problem end
  if ok then
    for key, kind in pairs(kinds) do
      if g[key] ~= nil and type(g[key]) ~= kind then return 'generation_config.read passed ' .. key .. ' of type ' .. type(g[key]) end
    end
  end
  write('adapter_config.json', bytes)
  local adapted, why = pcall(adapter_config.read, dir)
  problem = named(adapted, why, 'adapter_config.json')
  if problem then return problem end
  write('tokenizer_config.json', bytes)
  local read, config = pcall(special_tokens.read_json, dir .. '/tokenizer_config.json')
  problem = named(read, config, 'tokenizer_config.json')
  if problem then return problem end
  if read then
    local found, err = pcall(special_tokens.from_configs, config, nil, dir)
    problem = named(found, err, 'tokenizer_config.json')
    if problem then return problem end
    local checked, defaults = pcall(call_defaults.read, config, dir .. '/tokenizer_config.json')
    problem = named(checked, defaults, 'tokenizer_config.json')
    if problem then return problem end
    local n = checked and defaults.model_max_length
    if n and (type(n) ~= 'number' or n % 1 ~= 0 or n < 1) then
      return 'call_defaults.read passed model_max_length ' .. tostring(n)
    end
    for _, side in ipairs(checked and { defaults.padding_side, defaults.truncation_side } or {}) do
      if side ~= 'left' and side ~= 'right' then return 'call_defaults.read passed the side ' .. tostring(side) end
    end
  end
  return nil
end
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static lua_State* L = accel::fuzz::new_lua_state(kTarget, kSetup);
  return accel::fuzz::check_input(L, kTarget, "fuzz.configs", data, size);
}
