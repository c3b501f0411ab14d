-- Normalises over the trailing dims given by normalized_shape:
--   nn.LayerNorm(normalized_shape, {eps = 1e-5, elementwise_affine = true})
-- weight starts at ones, bias at zeros, both of normalized_shape.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local LayerNorm = Module:extend("LayerNorm")

function LayerNorm:init(normalized_shape, options)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  if type(normalized_shape) ~= "table" or #normalized_shape == 0 then
    args.error("nn.LayerNorm: normalized_shape must be a number or a table of numbers, got " ..
               tostring(normalized_shape))
  end
  for i, n in ipairs(normalized_shape) do args.positive_integer("nn.LayerNorm", "normalized_shape[" .. i .. "]", n) end
  local o = args.options("nn.LayerNorm", options, { eps = 1e-5, elementwise_affine = true },
                         { eps = "number", elementwise_affine = "boolean" })
  self.normalized_shape, self.eps = normalized_shape, o.eps
  if o.elementwise_affine then
    self.weight = core.ones(normalized_shape, { requires_grad = true })
    self.bias = core.zeros(normalized_shape, { requires_grad = true })
  end
end

function LayerNorm:forward(x)
  return core.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, { eps = self.eps })
end

function LayerNorm:__tostring()
  return string.format("LayerNorm(%s, eps %g)", table.concat(self.normalized_shape, "x"), self.eps)
end

return LayerNorm
