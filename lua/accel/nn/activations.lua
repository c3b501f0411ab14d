-- Parameter-free activation modules, one line each.
local F = require("accel.core").functional
local Module = require("accel.nn.module")

local activations = {}

local function activation(name, fn)
  local cls = Module:extend(name)
  cls.forward = function(_, x) return fn(x) end
  activations[name] = cls
end

activation("ReLU", F.relu)
activation("GELU", F.gelu)
activation("SiLU", F.silu)
activation("Tanh", F.tanh)
activation("Sigmoid", F.sigmoid)

return activations
