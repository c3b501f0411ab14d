-- accel.nn: layers as modules, nn.init, and nn.functional.
local core = require("accel.core")

local nn = {}
nn.Module = require("accel.nn.module")
nn.Linear = require("accel.nn.linear")
nn.Bilinear = require("accel.nn.bilinear")
nn.Sequential = require("accel.nn.sequential")
nn.ModuleList = require("accel.nn.module_list")
nn.ModuleDict = require("accel.nn.module_dict")
nn.Identity = require("accel.nn.identity")
nn.LayerNorm = require("accel.nn.layer_norm")
nn.RMSNorm = require("accel.nn.rms_norm")
nn.RotaryEmbedding = require("accel.nn.rotary_embedding")
nn.GroupNorm = require("accel.nn.group_norm")
nn.Embedding = require("accel.nn.embedding")
nn.MultiheadAttention = require("accel.nn.multihead_attention")
nn.TransformerEncoderLayer = require("accel.nn.transformer")
for _, name in ipairs({ "Linear", "Bilinear", "Identity", "LayerNorm", "RMSNorm", "GroupNorm", "Embedding" }) do
  nn.Module.mark_forward_keeps_no_tensors(nn[name])
end
for _, family in ipairs({ "activations", "conv", "pooling", "batch_norm", "dropout", "flatten" }) do
  for name, cls in pairs(require("accel.nn." .. family)) do
    nn[name] = cls
    nn.Module.mark_forward_keeps_no_tensors(cls)
  end
end

-- model:gradient_checkpointing_enable() / _disable() on every module.
local gradient_checkpointing = require("accel.nn.gradient_checkpointing")
nn.Module.gradient_checkpointing_enable = gradient_checkpointing.enable
nn.Module.gradient_checkpointing_disable = gradient_checkpointing.disable

nn.init = require("accel.nn.initialization")
nn.functional = core.functional

-- Marks a tensor as a trainable leaf (sharing its storage), so that a module
-- field holding it is registered as a parameter.
function nn.Parameter(t)
  if type(t) ~= "userdata" then
    require("accel.util.args").error("nn.Parameter: expected a tensor, got a " .. type(t))
  end
  return t:detach():requires_grad_(true)
end

return nn
