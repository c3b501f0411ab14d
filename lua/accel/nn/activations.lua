-- Activation modules. Parameter-free ones are one line each; the others
-- take PyTorch's arguments (dims are 1-based).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local F = core.functional

local activations = {}

-- A parameter-free activation: nn.ReLU() or nn.ReLU{} (it takes no options;
-- any key is an error naming it).
local function activation(name, fn)
  local cls = Module:extend(name)
  function cls:init(options)
    args.options("nn." .. name, options, {})
  end
  cls.forward = function(_, x) return fn(x) end
  activations[name] = cls
end

activation("ReLU", F.relu)
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

-- GELU{approximate = "none" | "tanh"} (also GELU("tanh"), as PyTorch's
-- positional argument): the exact (erf) form by default.
local GELU = Module:extend("GELU")
function GELU:init(options)
  if type(options) == "string" then options = { approximate = options } end
  local o = args.options("nn.GELU", options, { approximate = "none" }, { approximate = "string" })
  if o.approximate ~= "none" and o.approximate ~= "tanh" then
    args.error(string.format("nn.GELU: approximate must be 'none' or 'tanh', got '%s'", o.approximate))
  end
  self.approximate = o.approximate
end
function GELU:forward(x)
  if self.approximate == "none" then return F.gelu(x) end
  return F.gelu(x, { approximate = self.approximate })
end
function GELU:__tostring()
  return self.approximate == "none" and "GELU()" or "GELU(approximate tanh)"
end
activations.GELU = GELU

-- An activation with numeric arguments, given in order (nn.ELU(0.5)) or as
-- an options table (nn.ELU{alpha = 0.5}); fields holds their names and
-- defaults.
local function with_arguments(name, fn, fields)
  local cls = Module:extend(name)
  local where = "nn." .. name
  function cls:init(...)
    local given = { ... }
    if type(given[1]) == "table" then
      if select("#", ...) > 1 then
        args.error(string.format("%s: give its arguments in order or as one options table, not both", where))
      end
      local defaults, types = {}, {}
      for _, field in ipairs(fields) do defaults[field[1]], types[field[1]] = field[2], "number" end
      local o = args.options(where, given[1], defaults, types)
      given = {}
      for i, field in ipairs(fields) do given[i] = o[field[1]] end
    end
    for i, field in ipairs(fields) do
      local value = given[i]
      if value == nil then value = field[2] end
      if type(value) ~= "number" then
        args.error(string.format("%s: %s must be a number, got %s", where, field[1], tostring(value)))
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

-- Softmax(dim) and LogSoftmax(dim), or {dim = ...}: the dim is required
-- (1-based, -1 the last).
local function over_dim(name, fn)
  local cls = Module:extend(name)
  function cls:init(dim)
    if type(dim) == "table" then dim = args.options("nn." .. name, dim, { dim = args.NONE }).dim end
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

-- PReLU(num_parameters = 1, init = 0.25), or the same as an options table:
-- a learned slope for negative inputs, one for all channels or one per
-- channel (dim 2 of the input).
local PReLU = Module:extend("PReLU")
function PReLU:init(num_parameters, value)
  if type(num_parameters) == "table" then
    local o = args.options("nn.PReLU", num_parameters, { num_parameters = 1, init = 0.25 },
                           { num_parameters = "number", init = "number" })
    num_parameters, value = o.num_parameters, o.init
  end
  if value ~= nil and type(value) ~= "number" then
    args.error("nn.PReLU: init must be a number, got " .. tostring(value))
  end
  num_parameters = args.positive_integer("nn.PReLU", "num_parameters", num_parameters or 1)
  self.weight = core.full({ num_parameters }, value or 0.25, { requires_grad = true })
end
function PReLU:forward(x)
  return F.prelu(x, self.weight)
end
activations.PReLU = PReLU

return activations
