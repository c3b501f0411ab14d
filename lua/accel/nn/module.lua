-- The Module class: every layer, and every model a recipe defines with
--   local Block = nn.Module:extend("Block")
--   function Block:init(dim) self.fc = nn.Linear(dim, dim) end
--   function Block:forward(x) return self.fc(x):relu() end
-- Fields holding modules or parameters (leaf tensors that require grad) are
-- registered in assignment order; buffers are registered explicitly.
local core = require("accel.core")
local sorted_keys = require("accel.util.sorted_keys")
local args = require("accel.util.args")

local Module = { __name = "Module" }

local function is_module(v)
  return type(v) == "table" and getmetatable(v) ~= nil and rawget(v, "_fields") ~= nil
end
Module.is_module = is_module

local function is_parameter(v)
  return type(v) == "userdata" and v.requires_grad and v.is_leaf
end

-- Records first assignments so enumeration follows definition order, as
-- PyTorch's does. Later assignments replace values under the same name.
local function record_field(self, key, value)
  local fields = rawget(self, "_fields")
  fields[#fields + 1] = key
  if is_parameter(value) then rawget(self, "_parameter_keys")[key] = true end
  rawset(self, key, value)
end

-- A parameter a recipe freezes with p:requires_grad_(false), as PyTorch
-- recipes freeze layers, is kept as a buffer, the way peft's freeze and
-- Embedding.from_pretrained keep a frozen weight: it stays in state_dict, in
-- to() and in what prepare broadcasts, and leaves parameters(), so an
-- optimizer made afterwards holds nothing for it. requires_grad_(true)
-- makes it a parameter again (unfreezing a layer later in training; the
-- optimizer then needs it added, as it would if made with the trainable
-- ones only). requires_grad_ is the tensor's own and knows no module, so
-- the fields are looked at whenever the tree is enumerated (named_modules).
local function note_frozen(m)
  local keys, frozen = rawget(m, "_parameter_keys"), rawget(m, "_frozen_keys")
  for _, key in ipairs(m._fields) do
    local v = rawget(m, key)
    if is_parameter(v) then
      keys[key] = true
      if frozen[key] then m._buffers[key], frozen[key] = nil, nil end
    elseif keys[key] and not m._buffers[key] and core.is_tensor(v) and v.is_leaf then
      m._buffers[key], frozen[key] = true, true
    end
  end
end

-- Per-instance wrappers around forward, keyed weakly by module: big-model
-- loading uses them to refuse a module whose weights are still on the meta
-- device, to load a disk-offloaded module's weights just for its forward,
-- and to bring a module's inputs to its device.
-- A wrapper is called as wrapper(module, ...) and calls module:forward itself.
local forward_wrappers = setmetatable({}, { __mode = "k" })

function Module.set_forward_wrapper(m, wrapper)
  forward_wrappers[m] = wrapper
end

-- The wrapper set now (nil for none), for a wrapper that goes around it.
function Module.forward_wrapper(m)
  return forward_wrappers[m]
end

local function call_forward(self, ...)
  local wrapper = forward_wrappers[self]
  if wrapper then return wrapper(self, ...) end
  return self:forward(...)
end

local function describe(self)
  return self.__name .. "()"
end

-- Called with each module once its init has run, when set: accel.init_empty_weights
-- uses it to guard the modules it builds.
Module.on_new_instance = nil

local function new_instance(cls, ...)
  local self = setmetatable({ _fields = {}, _buffers = {}, _parameter_keys = {}, _frozen_keys = {}, training = true },
                            cls)
  self:init(...)
  if Module.on_new_instance then Module.on_new_instance(self) end
  return self
end

-- A subclass: instances get the class's methods, and `Class(...)` makes one.
function Module:extend(name)
  assert(type(name) == "string", "Module:extend needs a class name")
  local cls = {}
  for k, v in pairs(self) do
    if type(k) == "string" and k:sub(1, 2) == "__" then cls[k] = v end
  end
  cls.__name = name
  cls.__index = cls
  cls.super = self
  return setmetatable(cls, { __index = self, __call = new_instance, __tostring = function() return name end })
end

Module.__index = Module
Module.__newindex = record_field
Module.__call = call_forward
Module.__tostring = describe

-- The forward functions of built-in layers that keep no reference to their
-- input or output once they return. nn.Sequential releases the tensor it
-- passed from one such layer to the next, which nothing else can reach, at
-- once rather than at the next collection. Keyed by function, not class: a
-- subclass or instance with its own forward is not covered.
local forwards_keeping_no_tensors = setmetatable({}, { __mode = "k" })

function Module.mark_forward_keeps_no_tensors(cls)
  forwards_keeping_no_tensors[cls.forward] = true
end

function Module.forward_keeps_no_tensors(m)
  return forwards_keeping_no_tensors[m.forward] == true
end

function Module:init() end

function Module:forward()
  error(self.__name .. " has no forward method", 2)
end

function Module:register_buffer(name, tensor)
  self._buffers[name] = true
  self[name] = tensor
end

-- The name a field goes by in state dicts and device maps: its key, or, for
-- the modules of an nn.ModuleList made with {index_base = 0}, the position
-- counted from 0, as PyTorch names them (and so do the checkpoints of
-- transformers: "model.layers.0.mlp").
function Module.field_name(m, key)
  local base = rawget(m, "_index_base")
  if base and type(key) == "number" then return tostring(key - 1 + base) end
  return tostring(key)
end
local field_name = Module.field_name

-- Direct children as an ordered list of {name, module}.
function Module:named_children()
  local out = {}
  for _, key in ipairs(self._fields) do
    local v = rawget(self, key)
    if is_module(v) then out[#out + 1] = { field_name(self, key), v } end
  end
  return out
end

function Module:children()
  local out = {}
  for _, pair in ipairs(self:named_children()) do out[#out + 1] = pair[2] end
  return out
end

-- Every module of the tree, this one first, as an ordered list of {path, module}.
function Module:named_modules(prefix, out, seen)
  out, seen = out or {}, seen or {}
  if seen[self] then return out end
  seen[self] = true
  note_frozen(self)
  out[#out + 1] = { prefix or "", self }
  for _, pair in ipairs(self:named_children()) do
    local path = prefix and prefix ~= "" and (prefix .. "." .. pair[1]) or pair[1]
    pair[2]:named_modules(path, out, seen)
  end
  return out
end

function Module:modules()
  local out = {}
  for _, pair in ipairs(self:named_modules()) do out[#out + 1] = pair[2] end
  return out
end

-- Ordered list of {dotted name, tensor}, module by module in definition
-- order: "parameters", "buffers", or "state" (both, as PyTorch's state_dict
-- orders them); shared tensors appear once.
local function collect(self, kind)
  local out, seen = {}, {}
  for _, pair in ipairs(self:named_modules()) do
    local prefix, m = pair[1], pair[2]
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      local buffer = m._buffers[key] and v ~= nil
      local parameter = is_parameter(v) and not m._buffers[key]
      local wanted = (kind ~= "buffers" and parameter) or (kind ~= "parameters" and buffer)
      if wanted and not seen[v] then
        seen[v] = true
        out[#out + 1] = { prefix == "" and tostring(key) or (prefix .. "." .. tostring(key)), v }
      end
    end
  end
  return out
end

-- `for name, p in model:named_parameters() do ... end`, in definition order.
function Module:named_parameters()
  local list, i = collect(self, "parameters"), 0
  return function()
    i = i + 1
    if list[i] then return list[i][1], list[i][2] end
  end
end

function Module:parameters()
  local out = {}
  for _, pair in ipairs(collect(self, "parameters")) do out[#out + 1] = pair[2] end
  return out
end

function Module:named_buffers()
  local list, i = collect(self, "buffers"), 0
  return function()
    i = i + 1
    if list[i] then return list[i][1], list[i][2] end
  end
end

function Module:buffers()
  local out = {}
  for _, pair in ipairs(collect(self, "buffers")) do out[#out + 1] = pair[2] end
  return out
end

function Module:num_parameters()
  local n = 0
  for _, p in ipairs(self:parameters()) do n = n + p:numel() end
  return n
end

-- name -> tensor for parameters and buffers. The tensors alias the module's.
function Module:state_dict()
  local out = {}
  for _, pair in ipairs(collect(self, "state")) do out[pair[1]] = pair[2] end
  return out
end


-- Copies values in place. With strict (the default) the keys must match
-- exactly. Every problem is reported in one error, as PyTorch's: the
-- missing keys and the size mismatches in the module's order, the
-- unexpected keys sorted (a state dict has no order of its own); nothing
-- is copied unless all is well. Size mismatches are errors without strict
-- too.
function Module:load_state_dict(state, strict)
  if strict == nil then strict = true end
  local own, known = collect(self, "state"), {}
  local missing, mismatched, unexpected = {}, {}, {}
  for _, pair in ipairs(own) do
    local name, target = pair[1], pair[2]
    known[name] = true
    local source = state[name]
    if source == nil then
      missing[#missing + 1] = name
    elseif args.shape(source) ~= args.shape(target) then
      mismatched[#mismatched + 1] = string.format("'%s' has shape %s in the state dict but %s in the model", name,
                                                  args.shape(source), args.shape(target))
    end
  end
  for _, name in ipairs(sorted_keys(state)) do
    if not known[name] then unexpected[#unexpected + 1] = name end
  end
  local parts = {}
  if strict and #missing > 0 then parts[#parts + 1] = "missing keys: " .. table.concat(missing, ", ") end
  if strict and #unexpected > 0 then parts[#parts + 1] = "unexpected keys: " .. table.concat(unexpected, ", ") end
  if #mismatched > 0 then parts[#parts + 1] = "size mismatch: " .. table.concat(mismatched, "; ") end
  if #parts > 0 then error(self.__name .. ":load_state_dict: " .. table.concat(parts, "; "), 2) end
  core.no_grad(function()
    for _, pair in ipairs(own) do
      local source = state[pair[1]]
      if source ~= nil then pair[2]:copy_(source) end
    end
  end)
end

function Module:train(mode)
  if mode == nil then mode = true end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode) end
  return self
end

function Module:eval()
  return self:train(false)
end

function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

-- Calls fn(module) on every module of the tree, children first.
function Module:apply(fn)
  for _, child in ipairs(self:children()) do child:apply(fn) end
  fn(self)
  return self
end

-- A module's buffers that keep their dtype when the module is converted to
-- another (a 4-bit layer's codes and statistics, as bitsandbytes keeps its).
local no_fixed_dtypes, dtype_names = {}, {}
for _, name in ipairs(core.dtype_names()) do dtype_names[name] = true end
local function fixed_dtypes(m)
  return rawget(m, "_fixed_dtypes") or no_fixed_dtypes
end

-- Moves parameters and buffers to a device or dtype. Parameters move in
-- place, as PyTorch's module.to(): each keeps its identity, so an optimizer
-- made before the move (or before prepare) still holds the model's
-- parameters. Gradients move with them.
function Module:to(target)
  for _, m in ipairs(self:modules()) do
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      if is_parameter(v) then
        local grad = v.grad
        v:set_data(v:detach():to(target))
        if grad then v.grad = grad:to(target) end
      elseif m._buffers[key] and v ~= nil and not (fixed_dtypes(m)[key] and dtype_names[target]) then
        rawset(m, key, v:to(target))
      end
    end
  end
  return self
end

-- Replaces every parameter and buffer with an uninitialised tensor of the
-- same shape and dtype on `device`, as PyTorch's module.to_empty(): the way
-- to give a model built under accel.init_empty_weights real memory. LibTorch
-- cannot swap a meta tensor's data in place, so parameters are new tensors.
function Module:to_empty(device)
  if type(device) ~= "string" then
    error(self.__name .. ":to_empty: the device must be a string such as \"cpu\", got a " .. type(device), 2)
  end
  local replaced = {}  -- a tensor shared by several modules stays shared
  for _, m in ipairs(self:modules()) do
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      local buffer = m._buffers[key] and v ~= nil
      if buffer or is_parameter(v) then
        if not replaced[v] then
          local fresh = core.empty(v:size(), { dtype = v.dtype, device = device })
          replaced[v] = buffer and fresh or fresh:requires_grad_()
        end
        rawset(m, key, replaced[v])
      end
    end
    forward_wrappers[m] = nil
  end
  return self
end

return Module
