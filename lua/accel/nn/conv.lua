-- Conv1d and Conv2d: nn.Conv2d(in_channels, out_channels, kernel_size,
-- {stride, padding, dilation, groups, bias, padding_mode}) with PyTorch's
-- defaults and initialisation (weight and bias U(-k, k), k = 1/sqrt(fan_in)).
local core = require("accel.core")
local Module = require("accel.nn.module")
local args = require("accel.util.args")
local init = require("accel.nn.initialization")

local F = core.functional

local padding_modes = { zeros = true, reflect = true, replicate = true, circular = true }

local function make(name, dims, functional)
  local cls = Module:extend(name)
  local where = "nn." .. name

  function cls:init(in_channels, out_channels, kernel_size, options)
    args.positive_integer(where, "in_channels", in_channels)
    args.positive_integer(where, "out_channels", out_channels)
    local o = args.options(where, options, { stride = 1, padding = 0, dilation = 1, groups = 1, bias = true,
                                             padding_mode = "zeros" },
                           { stride = "number|table", padding = "number|table|string", dilation = "number|table",
                             groups = "number", bias = "boolean", padding_mode = "string" })
    self.in_channels, self.out_channels = in_channels, out_channels
    self.kernel_size = args.tuple(where, "kernel_size", kernel_size, dims)
    self.stride = args.tuple(where, "stride", o.stride, dims)
    self.dilation = args.tuple(where, "dilation", o.dilation, dims)
    if o.padding == "same" or o.padding == "valid" then
      self.padding = o.padding
    else
      self.padding = args.tuple(where, "padding", o.padding, dims)
    end
    self.groups = args.positive_integer(where, "groups", o.groups)
    if in_channels % o.groups ~= 0 or out_channels % o.groups ~= 0 then
      args.error(string.format("%s: in_channels %d and out_channels %d must both be divisible by groups %d",
                               where, in_channels, out_channels, o.groups))
    end
    if not padding_modes[o.padding_mode] then
      args.error(string.format("%s: padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', got '%s'",
                               where, tostring(o.padding_mode)))
    end
    if self.padding == "same" then
      for i = 1, dims do
        if self.stride[i] ~= 1 then args.error(where .. ": padding 'same' needs stride 1") end
      end
    end
    self.padding_mode = o.padding_mode

    local shape = { out_channels, in_channels / o.groups }
    for i = 1, dims do shape[#shape + 1] = self.kernel_size[i] end
    self.weight = init.kaiming_uniform_(core.empty(shape), { a = math.sqrt(5) }):requires_grad_()
    if o.bias then
      local fan_in = init.calculate_fans(self.weight)
      local bound = 1 / math.sqrt(fan_in)
      self.bias = init.uniform_(core.empty(out_channels), -bound, bound):requires_grad_()
    end
  end

  -- F.pad's list (last dim first) for the padding a non-zeros padding_mode adds.
  local function explicit_padding(self)
    local pads = {}
    for i = dims, 1, -1 do
      local left, right
      if self.padding == "valid" then
        left, right = 0, 0
      elseif self.padding == "same" then
        local total = self.dilation[i] * (self.kernel_size[i] - 1)
        left = math.floor(total / 2)
        right = total - left
      else
        left, right = self.padding[i], self.padding[i]
      end
      pads[#pads + 1], pads[#pads + 2] = left, right
    end
    return pads
  end

  function cls:forward(x)
    if self.padding_mode ~= "zeros" then
      x = F.pad(x, explicit_padding(self), { mode = self.padding_mode })
      return functional(x, self.weight, self.bias, { stride = self.stride, dilation = self.dilation,
                                                     groups = self.groups })
    end
    return functional(x, self.weight, self.bias, { stride = self.stride, padding = self.padding,
                                                   dilation = self.dilation, groups = self.groups })
  end

  function cls:__tostring()
    return string.format("%s(%d -> %d, kernel %s, stride %s)", name, self.in_channels, self.out_channels,
                         table.concat(self.kernel_size, "x"), table.concat(self.stride, "x"))
  end

  return cls
end

return {
  Conv1d = make("Conv1d", 1, F.conv1d),
  Conv2d = make("Conv2d", 2, F.conv2d),
}
