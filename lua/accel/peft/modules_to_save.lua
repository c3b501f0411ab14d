-- PEFT's ModulesToSaveWrapper: a module of modules_to_save is trained
-- whole, as a copy beside the frozen original, so disable_adapter can still
-- run the original:
--   original_module               the model's module, frozen
--   modules_to_save.default       a trainable copy: the one forward runs
-- (state_dict names as PEFT's: lm_head.modules_to_save.default.weight).
local core = require("accel.core")
local nn = require("accel.nn")
local forward_attributes = require("accel.peft.forward_attributes")

local Module = nn.Module
local is_tensor = core.is_tensor

local ModulesToSaveWrapper = Module:extend("ModulesToSaveWrapper")

-- A copy of module m with tensors of its own: parameters as trainable
-- leaves, buffers cloned, a tensor shared inside m shared in the copy.
-- Tables under keys starting with "_" are the module's bookkeeping
-- (_fields, _buffers, ModuleDict's _names) and are copied, so that what is
-- registered on the copy later leaves m alone; other values (settings, a
-- config table) are shared, being read-only after init. The big-model
-- forward wrappers of m (device placement, disk offload) are not copied.
local function copy_module(m, seen)
  if seen[m] then return seen[m] end
  local copy = setmetatable({}, getmetatable(m))
  seen[m] = copy
  for key, value in pairs(m) do
    if Module.is_module(value) then
      value = copy_module(value, seen)
    elseif is_tensor(value) then
      if not seen[value] then
        local fresh = value:detach():clone()
        seen[value] = m._buffers[key] and fresh or fresh:requires_grad_(value.requires_grad)
      end
      value = seen[value]
    elseif type(value) == "table" and type(key) == "string" and key:sub(1, 1) == "_" then
      local own = {}
      for k, v in pairs(value) do own[k] = v end
      value = own
    end
    rawset(copy, key, value)
  end
  return copy
end

function ModulesToSaveWrapper:init(module)
  self.original_module = module
  self.modules_to_save = nn.ModuleDict({ default = copy_module(module, {}) })
  rawset(self, "disable_adapters", false)  -- disable_adapter(fn) sets it while fn runs
end

function ModulesToSaveWrapper:active()
  if self.disable_adapters then return self.original_module end
  return self.modules_to_save.default
end

function ModulesToSaveWrapper:forward(...)
  return self:active()(...)
end

function ModulesToSaveWrapper:__tostring()
  return "ModulesToSaveWrapper(" .. tostring(self.original_module) .. ")"
end

forward_attributes(ModulesToSaveWrapper, function(self)
  local copies = rawget(self, "modules_to_save")
  if rawget(self, "disable_adapters") or not copies then return rawget(self, "original_module") end
  return rawget(copies, "default")
end)

return ModulesToSaveWrapper
