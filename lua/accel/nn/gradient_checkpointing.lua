-- model:gradient_checkpointing_enable() and model:gradient_checkpointing_disable(),
-- methods of every nn.Module (nn/init.lua installs them), as transformers'
-- per decoder layer: while the model trains with grad mode on, each block
-- runs through accel.checkpoint (lua/accel/activation_checkpoint.lua), so
-- backward recomputes its activations instead of keeping them. The blocks
-- are the modules of each nn.ModuleList in the model that is not inside
-- another list's block: a Llama's model.layers, a GPT-2's transformer.h, a
-- BERT's encoder.layer (not a Mixtral layer's experts, which its layer's
-- checkpoint covers). In eval mode or under accel.no_grad (generation)
-- blocks run as they are.
--
-- A block's forward is wrapped through Module.set_forward_wrapper, around
-- a wrapper already there (big-model placement); the model's own forward
-- and its files are untouched. model.is_gradient_checkpointing says which.
local Module = require("accel.nn.module")
local ModuleList = require("accel.nn.module_list")
local checkpoint = require("accel.nn.activation_checkpoint")
local core = require("accel.core")
local args = require("accel.util.args")

local gradient_checkpointing = {}

-- block -> { wrapper = ours, inner = the wrapper ours went around }
local wrapped = setmetatable({}, { __mode = "k" })

local function is_list(m)
  local cls = getmetatable(m)
  while cls do
    if cls == ModuleList then return true end
    cls = rawget(cls, "super")
  end
  return false
end

-- The blocks of `model`'s outermost lists, each once, in the model's order.
local function blocks(model)
  local out, seen = {}, {}
  local function visit(m)
    if is_list(m) then
      for i = 1, #m do
        if not seen[m[i]] then
          seen[m[i]] = true
          out[#out + 1] = m[i]
        end
      end
      return
    end
    for _, child in ipairs(m:children()) do visit(child) end
  end
  visit(model)
  return out
end

local function checkpointed(inner)
  local forward = inner or function(m, ...) return m:forward(...) end
  return function(m, ...)
    if m.training and core.is_grad_enabled() then return checkpoint(forward, m, ...) end
    return forward(m, ...)
  end
end

function gradient_checkpointing.enable(model, options)
  local where = tostring(model.__name) .. ":gradient_checkpointing_enable"
  args.options(where, options, {})
  local list = blocks(model)
  if #list == 0 then
    args.error(where .. ": the model has no nn.ModuleList of blocks to checkpoint; "
               .. "wrap a block's call in accel.checkpoint(fn, ...) instead")
  end
  for _, block in ipairs(list) do
    if not wrapped[block] then
      local inner = Module.forward_wrapper(block)
      local wrapper = checkpointed(inner)
      wrapped[block] = { wrapper = wrapper, inner = inner }
      Module.set_forward_wrapper(block, wrapper)
    end
  end
  rawset(model, "is_gradient_checkpointing", true)
  return model
end

function gradient_checkpointing.disable(model)
  for _, block in ipairs(blocks(model)) do
    local entry = wrapped[block]
    -- A wrapper set since, over ours or in its place, is left as it is.
    if entry and Module.forward_wrapper(block) == entry.wrapper then
      Module.set_forward_wrapper(block, entry.inner)
    end
    wrapped[block] = nil
  end
  rawset(model, "is_gradient_checkpointing", false)
  return model
end

return gradient_checkpointing
