-- A list of modules that registers them (state_dict keys "1.weight", ...)
-- without running them; the owner's forward decides how:
--   self.layers = nn.ModuleList({ Block(), Block() })
--   for _, layer in ipairs(self.layers) do x = layer(x) end
-- `list[i]`, `#list` and `ipairs(list)` reach the modules.
local Module = require("accel.nn.module")
local args = require("accel.args")

local ModuleList = Module:extend("ModuleList")

local function check(where, m, position)
  if not Module.is_module(m) then
    args.error(string.format("%s: element %d is a %s, not a module", where, position, type(m)))
  end
end

function ModuleList:init(modules)
  self.length = 0
  if modules ~= nil then self:extend(modules) end
end

function ModuleList:append(m)
  check("nn.ModuleList:append", m, self.length + 1)
  self.length = self.length + 1
  self[self.length] = m
  return self
end

function ModuleList:extend(modules)
  if type(modules) ~= "table" or Module.is_module(modules) then
    args.error("nn.ModuleList: expected a table of modules, got a " .. type(modules))
  end
  for i = 1, #modules do check("nn.ModuleList", modules[i], i) end
  for i = 1, #modules do self:append(modules[i]) end
  return self
end

function ModuleList:__tostring()
  local parts = {}
  for i = 1, self.length do parts[i] = "  (" .. i .. "): " .. tostring(self[i]) end
  return "ModuleList(\n" .. table.concat(parts, "\n") .. "\n)"
end

return ModuleList
