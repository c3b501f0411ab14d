-- accel.peft.prepare_model_for_kbit_training(model, {use_gradient_checkpointing
-- = true}) -> model, as PEFT's, before get_peft_model on a 4-bit model:
-- every parameter frozen; every float16 or bfloat16 parameter (norms,
-- embeddings, the output layer: all but the 4-bit codes, which are no
-- parameters) converted to float32 for stable training; and with
-- use_gradient_checkpointing, the input embeddings' output made to require
-- grad (PEFT's enable_input_require_grads, so that a checkpointed first
-- block whose parameters are all frozen still has a gradient to send back
-- to the adapters inside it) and model:gradient_checkpointing_enable().
local core = require("accel.core")
local args = require("accel.util.args")
local Module = require("accel.nn.module")
local Embedding = require("accel.nn.embedding")

local where = "accel.peft.prepare_model_for_kbit_training"

local half = { float16 = true, bfloat16 = true }

-- The input embeddings: the first nn.Embedding of the model, as transformers' get_input_embeddings.
local function input_embeddings(model)
  for _, m in ipairs(model:modules()) do
    if getmetatable(m) == Embedding then return m end
  end
  return nil
end

return function(model, options)
  if not Module.is_module(model) then args.error(where .. ": expected a model, got a " .. type(model)) end
  local o = args.options(where, options, { use_gradient_checkpointing = true },
                         { use_gradient_checkpointing = "boolean" })
  core.no_grad(function()
    for _, p in ipairs(model:parameters()) do
      p:requires_grad_(false)
      if half[p.dtype] then p:set_data(p:detach():float()) end
    end
    -- Frozen parameters are buffers now (nn/module.lua): convert theirs too.
    for _, pair in ipairs(model:named_modules()) do
      local m = pair[2]
      for _, key in ipairs(m._fields) do
        local v = rawget(m, key)
        local fixed = rawget(m, "_fixed_dtypes")
        if m._buffers[key] and type(v) == "userdata" and half[v.dtype] and not (fixed and fixed[key]) then
          rawset(m, key, v:float())
        end
      end
    end
  end)
  if o.use_gradient_checkpointing then
    local embeddings = input_embeddings(model)
    if embeddings then
      local forward = embeddings.forward
      rawset(embeddings, "forward", function(self, ...) return forward(self, ...):requires_grad_(true) end)
    end
    model:gradient_checkpointing_enable()
  end
  return model
end
