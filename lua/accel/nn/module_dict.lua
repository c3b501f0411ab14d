-- Modules by name; the names are the state_dict path parts ("enc.weight"):
--   local heads = nn.ModuleDict({ cls = nn.Linear(8, 2), reg = nn.Linear(8, 1) })
--   heads.cls(x); for name, m in heads:items() do ... end
-- A table of names is taken in sorted order (Lua tables have none); a list
-- of {name, module} pairs keeps its order. Names may not contain "." or
-- shadow a method or field of the module ("forward", "training", ...).
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local ModuleDict = Module:extend("ModuleDict")

function ModuleDict:init(modules)
  self._names = {}
  if modules ~= nil then self:update(modules) end
end

-- Adds (or replaces) the module under `name`.
function ModuleDict:set(name, m)
  if type(name) ~= "string" or name == "" or name:find(".", 1, true) then
    args.error(string.format("nn.ModuleDict: a name must be a non-empty string without '.', got %s", tostring(name)))
  end
  if not Module.is_module(m) then
    args.error(string.format("nn.ModuleDict: '%s' is a %s, not a module", name, type(m)))
  end
  local existing = rawget(self, name)
  if existing == nil then
    if ModuleDict[name] ~= nil or name:sub(1, 1) == "_" then
      args.error(string.format("nn.ModuleDict: the name '%s' would shadow a method or field of the module", name))
    end
    self._names[#self._names + 1] = name
  elseif not Module.is_module(existing) then
    args.error(string.format("nn.ModuleDict: the name '%s' would shadow a method or field of the module", name))
  end
  self[name] = m
  return self
end

function ModuleDict:update(modules)
  if type(modules) ~= "table" or Module.is_module(modules) then
    args.error("nn.ModuleDict: expected a table of modules, got a " .. type(modules))
  end
  if #modules > 0 then
    for i, pair in ipairs(modules) do
      if type(pair) ~= "table" or Module.is_module(pair) then
        args.error(string.format("nn.ModuleDict: element %d must be a {name, module} pair", i))
      end
      self:set(pair[1], pair[2])
    end
    return self
  end
  local names = {}
  for name in pairs(modules) do names[#names + 1] = name end
  table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  for _, name in ipairs(names) do self:set(name, modules[name]) end
  return self
end

function ModuleDict:keys()
  local out = {}
  for i, name in ipairs(self._names) do out[i] = name end
  return out
end

function ModuleDict:len()
  return #self._names
end

-- `for name, module in dict:items() do`, in insertion order.
function ModuleDict:items()
  local i = 0
  return function()
    i = i + 1
    local name = self._names[i]
    if name then return name, rawget(self, name) end
  end
end

function ModuleDict:__tostring()
  local parts = {}
  for i, name in ipairs(self._names) do parts[i] = "  (" .. name .. "): " .. tostring(rawget(self, name)) end
  return "ModuleDict(\n" .. table.concat(parts, "\n") .. "\n)"
end

return ModuleDict
