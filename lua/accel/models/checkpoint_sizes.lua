-- What a downloaded config.json may ask for, checked against the
-- checkpoint beside it before a layer is built. A config is a few hundred
-- bytes a stranger wrote: num_hidden_layers = 100000 would build every
-- layer (3.2 GB and 27 s of empty modules) before the weights were compared
-- and found missing. Here the checkpoint's tensor names (its index or its
-- headers, no tensor read) give how many layers and experts it holds, and a
-- config asking for more is refused naming the key, the file and what the
-- checkpoint holds. Whatever the checkpoint, a config may ask for at most
-- MAX layers and experts (the largest released models have 126 layers and
-- 384 experts); a folder whose weights cannot be opened gets that bound
-- alone, and the loader's own error about its weights afterwards.
--   checkpoint_sizes.check(cfg, dir)
local args = require("accel.util.args")
local config = require("accel.models.config")
local weights_source = require("accel.big_modeling.weights_source")

local checkpoint_sizes = {}

-- The counts a config gives, each with the name patterns whose number
-- (0-based) counts it: Llama's model.layers.N, GPT-2's h.N, BERT's
-- encoder.layer.N, Mixtral's experts.N.
local COUNTS = {
  { keys = { "num_hidden_layers", "n_layer" }, what = "layers", max = 1024,
    patterns = { "%.layers%.(%d+)%.", "%.h%.(%d+)%.", "%.layer%.(%d+)%." } },
  { keys = { "num_local_experts" }, what = "experts", max = 4096, patterns = { "%.experts%.(%d+)%." } },
}

-- How many `count` the checkpoint's names hold (one past the largest index).
local function held(names, count)
  local n = 0
  for _, name in ipairs(names) do
    for _, pattern in ipairs(count.patterns) do
      local index = tonumber(("." .. name):match(pattern))
      if index and index + 1 > n then n = index + 1 end
    end
  end
  return n
end

function checkpoint_sizes.check(cfg, dir)
  local opened, source = pcall(weights_source.open, dir)
  local names = opened and source:names() or nil
  if opened then source:close() end
  for _, count in ipairs(COUNTS) do
    local holds = names and held(names, count)
    for _, key in ipairs(count.keys) do
      local asked = cfg[key]
      if type(asked) == "number" and holds and asked > holds then
        args.error(string.format("'%s': %s is %s, but the checkpoint holds %d %s", config.source(cfg), key,
                                 tostring(asked), holds, count.what))
      elseif type(asked) == "number" and asked > count.max then
        args.error(string.format("'%s': %s is %s, more than the %d %s accel builds", config.source(cfg), key,
                                 tostring(asked), count.max, count.what))
      end
    end
  end
end

return checkpoint_sizes
