-- A list of modules that registers them (state_dict keys "1.weight", ...)
-- without running them; the owner's forward decides how:
--   self.layers = nn.ModuleList({ Block(), Block() })
--   for _, layer in ipairs(self.layers) do x = layer(x) end
-- `list[i]`, `#list` and `ipairs(list)` reach the modules. With
-- {index_base = 0} their names count from 0 ("0.weight", as PyTorch and the
-- checkpoints of transformers name them); `list[1]` is still the first.
-- Any index_base n >= 0 names them from n: a rank holding experts 4 to 7 of
-- a mixture (accel.parallel.expert_parallel) keeps their whole model's names.
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
  if o.index_base < 0 or o.index_base % 1 ~= 0 then
    args.error("nn.ModuleList: index_base must be a whole number from 0, got " .. tostring(o.index_base))
  end
  if o.index_base ~= 1 then rawset(self, "_index_base", o.index_base) end
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
