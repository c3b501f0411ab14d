-- Pooling layers, parameter-free: MaxPool1d/2d(kernel_size, {stride, padding,
-- dilation, ceil_mode, return_indices}), AvgPool1d/2d(kernel_size, {stride,
-- padding, ceil_mode, count_include_pad, divisor_override (2d)}) and
-- AdaptiveAvgPool1d/2d(output_size). stride defaults to the kernel size.
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")

local F = core.functional

local pooling = {}

local types = { stride = "number|table", padding = "number|table", dilation = "number|table", ceil_mode = "boolean",
                return_indices = "boolean", count_include_pad = "boolean", divisor_override = "number" }

local function make(name, dims, functional, defaults)
  local cls = Module:extend(name)
  local where = "nn." .. name
  function cls:init(kernel_size, options)
    self.kernel_size = args.tuple(where, "kernel_size", kernel_size, dims)
    local o = args.options(where, options, defaults, types)
    for _, key in ipairs({ "stride", "padding", "dilation" }) do
      if o[key] ~= nil then o[key] = args.tuple(where, key, o[key], dims) end
    end
    self.options = o
  end
  function cls:forward(x)
    return functional(x, self.kernel_size, self.options)
  end
  function cls:__tostring()
    return string.format("%s(kernel %s)", name, table.concat(self.kernel_size, "x"))
  end
  pooling[name] = cls
end

local max_defaults = { stride = args.NONE, padding = 0, dilation = 1, ceil_mode = false, return_indices = false }
make("MaxPool1d", 1, F.max_pool1d, max_defaults)
make("MaxPool2d", 2, F.max_pool2d, max_defaults)
make("AvgPool1d", 1, F.avg_pool1d, { stride = args.NONE, padding = 0, ceil_mode = false, count_include_pad = true })
make("AvgPool2d", 2, F.avg_pool2d, { stride = args.NONE, padding = 0, ceil_mode = false, count_include_pad = true,
                                     divisor_override = args.NONE })

local function adaptive(name, dims, functional)
  local cls = Module:extend(name)
  function cls:init(output_size)
    self.output_size = args.tuple("nn." .. name, "output_size", output_size, dims)
  end
  function cls:forward(x)
    return functional(x, self.output_size)
  end
  function cls:__tostring()
    return string.format("%s(output %s)", name, table.concat(self.output_size, "x"))
  end
  pooling[name] = cls
end

adaptive("AdaptiveAvgPool1d", 1, F.adaptive_avg_pool1d)
adaptive("AdaptiveAvgPool2d", 2, F.adaptive_avg_pool2d)

return pooling
