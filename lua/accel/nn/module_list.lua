-- A list of modules that registers them (state_dict keys "1.weight", ...)
-- without running them; the owner's forward decides how:
--   self.layers = nn.ModuleList({ Block(), Block() })
--   for _, layer in ipairs(self.layers) do x = layer(x) end
-- `list[i]`, `#list` and `ipairs(list)` reach the modules. With
-- {index_base = 0} their names count from 0 ("0.weight", as PyTorch and the
-- checkpoints of transformers name them); `list[1]` is still the first.
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local ModuleList = Module:extend("ModuleList")

local function check(where, m, position)
  if not Module.is_module(m) then
    args.error(string.format("%s: element %d is a %s, not a module", where, position, type(m)))
  end
end

function ModuleList:init(modules, options)
  local o = args.options("nn.ModuleList", options, { index_base = 1 }, { index_base = "number" })
  if o.index_base ~= 0 and o.index_base ~= 1 then
    args.error("nn.ModuleList: index_base must be 0 or 1, got " .. tostring(o.index_base))
  end
  if o.index_base == 0 then rawset(self, "_index_base", 0) end
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
  for i = 1, self.length do parts[i] = "  (" .. Module.field_name(self, i) .. "): " .. tostring(self[i]) end
  return "ModuleList(\n" .. table.concat(parts, "\n") .. "\n)"
end

return ModuleList
