-- Activation modules. Parameter-free ones are one line each; the others
-- take PyTorch's arguments (dims are 1-based).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.nn.args")

local F = core.functional

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
activation("SELU", F.selu)
activation("ReLU6", F.relu6)
activation("Mish", F.mish)
activation("Hardswish", F.hardswish)
activation("Hardsigmoid", F.hardsigmoid)
activation("LogSigmoid", F.logsigmoid)
activation("Softsign", F.softsign)

-- An activation with numeric arguments: fields holds their names and defaults.
local function with_arguments(name, fn, fields)
  local cls = Module:extend(name)
  function cls:init(...)
    local given = { ... }
    for i, field in ipairs(fields) do
      local value = given[i]
      if value == nil then value = field[2] end
      if type(value) ~= "number" then
        args.error(string.format("nn.%s: %s must be a number, got %s", name, field[1], tostring(value)))
      end
      self[field[1]] = value
    end
  end
  function cls:forward(x)
    local values = {}
    for i, field in ipairs(fields) do values[i] = self[field[1]] end
    return fn(x, unpack(values, 1, #fields))
  end
  activations[name] = cls
end

with_arguments("LeakyReLU", F.leaky_relu, { { "negative_slope", 0.01 } })
with_arguments("ELU", F.elu, { { "alpha", 1.0 } })
with_arguments("CELU", F.celu, { { "alpha", 1.0 } })
with_arguments("Softplus", F.softplus, { { "beta", 1 }, { "threshold", 20 } })
with_arguments("Hardtanh", F.hardtanh, { { "min_val", -1 }, { "max_val", 1 } })

-- Softmax(dim) and LogSoftmax(dim): the dim is required (1-based, -1 the last).
local function over_dim(name, fn)
  local cls = Module:extend(name)
  function cls:init(dim)
    if type(dim) ~= "number" or dim == 0 or dim % 1 ~= 0 then
      args.error(string.format("nn.%s: dim must be a non-zero integer (1-based, -1 the last), got %s", name,
                               tostring(dim)))
    end
    self.dim = dim
  end
  function cls:forward(x)
    return fn(x, self.dim)
  end
  activations[name] = cls
end

over_dim("Softmax", F.softmax)
over_dim("LogSoftmax", F.log_softmax)

-- PReLU(num_parameters = 1, init = 0.25): a learned slope for negative inputs,
-- one for all channels or one per channel (dim 2 of the input).
local PReLU = Module:extend("PReLU")
function PReLU:init(num_parameters, value)
  num_parameters = args.positive_integer("nn.PReLU", "num_parameters", num_parameters or 1)
  self.weight = core.full({ num_parameters }, value or 0.25, { requires_grad = true })
end
function PReLU:forward(x)
  return F.prelu(x, self.weight)
end
activations.PReLU = PReLU

return activations
