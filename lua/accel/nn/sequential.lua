-- Modules applied in order; children are named 1, 2, ... (state_dict keys
-- "1.weight", "2.bias", ...). `seq[i]`, `#seq` and `ipairs(seq)` reach them.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local Sequential = Module:extend("Sequential")

function Sequential:init(...)
  local n = select("#", ...)
  for i = 1, n do
    local m = select(i, ...)
    if not Module.is_module(m) then
      error(string.format("nn.Sequential: argument %d is a %s, not a module", i, type(m)), 3)
    end
    self[i] = m
  end
  self.length = n
end

function Sequential:append(m)
  if not Module.is_module(m) then
    args.error(string.format("nn.Sequential:append: expected a module, got a %s", type(m)))
  end
  self.length = self.length + 1
  self[self.length] = m
  return self
end

-- A tensor passed between two layers that keep no tensors (Linear, ReLU,
-- ...) is reachable from this loop only, so its memory is released as soon
-- as the next layer returns: a step's activations are reused while still
-- in cache, and the collector runs less often. `owned` says x is such a
-- tensor: the last layer made it, and it is not this forward's input.
function Sequential:forward(x)
  local owned = false
  for i = 1, self.length do
    local m = self[i]
    local y = m(x)
    if not rawequal(y, x) then
      local keeps_none = Module.forward_keeps_no_tensors(m)
      if owned and keeps_none then core.release_tensor(x) end
      owned = keeps_none
    end
    x = y
  end
  return x
end

function Sequential:__tostring()
  local parts = {}
  for i = 1, self.length do parts[i] = "  (" .. i .. "): " .. tostring(self[i]) end
  return "Sequential(\n" .. table.concat(parts, "\n") .. "\n)"
end

return Sequential
