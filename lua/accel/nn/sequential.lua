-- Modules applied in order; children are named 1, 2, ... (state_dict keys
-- "1.weight", "2.bias", ...). `seq[i]`, `#seq` and `ipairs(seq)` reach them.
local Module = require("accel.nn.module")
local args = require("accel.nn.args")

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

function Sequential:forward(x)
  for i = 1, self.length do x = self[i](x) end
  return x
end

function Sequential:__tostring()
  local parts = {}
  for i = 1, self.length do parts[i] = "  (" .. i .. "): " .. tostring(self[i]) end
  return "Sequential(\n" .. table.concat(parts, "\n") .. "\n)"
end

return Sequential
