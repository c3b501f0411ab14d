-- Root-mean-square normalisation over the trailing dims (no centring):
--   nn.RMSNorm(normalized_shape, {eps, elementwise_affine = true})
-- y = x / sqrt(mean(x^2) + eps) * weight, as PyTorch's nn.RMSNorm; eps
-- defaults to the machine epsilon of x's dtype, as there. A half-precision
-- input is normalised in float32 and cast back before the weight is
-- applied, as the RMSNorm layers of Llama-family checkpoints do (so their
-- bfloat16 outputs match transformers'); weight starts at ones.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local RMSNorm = Module:extend("RMSNorm")

-- torch.finfo(dtype).eps
local machine_epsilon = { float32 = 2 ^ -23, float64 = 2 ^ -52, float16 = 2 ^ -10, bfloat16 = 2 ^ -7 }

function RMSNorm:init(normalized_shape, options)
  if type(normalized_shape) == "number" then normalized_shape = { normalized_shape } end
  if type(normalized_shape) ~= "table" or #normalized_shape == 0 then
    args.error("nn.RMSNorm: normalized_shape must be a number or a table of numbers, got " ..
               tostring(normalized_shape))
  end
  for i, n in ipairs(normalized_shape) do args.positive_integer("nn.RMSNorm", "normalized_shape[" .. i .. "]", n) end
  local o = args.options("nn.RMSNorm", options, { eps = args.NONE, elementwise_affine = true },
                         { eps = "number", elementwise_affine = "boolean" })
  self.normalized_shape, self.eps = normalized_shape, o.eps
  local dims = {}
  for i = 1, #normalized_shape do dims[i] = -i end
  rawset(self, "dims", dims)
  if o.elementwise_affine then self.weight = core.ones(normalized_shape, { requires_grad = true }) end
end

function RMSNorm:forward(x)
  local dtype = x.dtype
  local upcast = dtype == "float16" or dtype == "bfloat16"
  local h = upcast and x:float() or x
  local eps = self.eps or machine_epsilon[dtype] or machine_epsilon.float32
  -- h * h rather than h:pow(2): the same numbers, and LibTorch 1.13's pow
  -- and its backward took 30x the time of the products here.
  h = h * ((h * h):mean(self.dims, true) + eps):rsqrt()
  if upcast then h = h:to(dtype) end
  if self.weight then return self.weight * h end
  return h
end

function RMSNorm:__tostring()
  return string.format("RMSNorm(%s%s)", table.concat(self.normalized_shape, "x"),
                       self.eps and string.format(", eps %g", self.eps) or "")
end

return RMSNorm
