-- nn.init: in-place initialisers with PyTorch's distributions and defaults.
-- Each fills its tensor under no_grad and returns it:
--   nn.init.kaiming_uniform_(conv.weight, { nonlinearity = "relu" })
local core = require("accel.core")
local args = require("accel.util.args")

local init = {}

local function check_tensor(where, t)
  if type(t) ~= "userdata" then
    args.error(string.format("nn.init.%s: expected a tensor, got a %s", where, type(t)))
  end
end

local function fill_with(t, values)
  core.no_grad(function() t:copy_(values) end)
  return t
end

local function like(t)
  return { dtype = t.dtype, device = t.device }
end

-- fan_in and fan_out as PyTorch computes them: dims 2 and 1 times the
-- receptive field (the product of the remaining dims).
function init.calculate_fans(t, where)
  local shape = t.shape
  if #shape < 2 then
    args.error(string.format("nn.init.%s: fan in and fan out need a tensor of at least 2 dims, got shape %s",
                             where or "calculate_fans", args.shape(t)))
  end
  local receptive = 1
  for i = 3, #shape do receptive = receptive * shape[i] end
  return shape[2] * receptive, shape[1] * receptive
end

-- The recommended gain for a nonlinearity (param: leaky_relu's negative slope).
function init.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
                   conv_transpose2d = true, conv_transpose3d = true, sigmoid = true }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "selu" then return 3 / 4 end
  if nonlinearity == "leaky_relu" then
    local slope = param
    if slope == nil then slope = 0.01 end
    if type(slope) ~= "number" then
      args.error("nn.init.calculate_gain: negative_slope " .. tostring(param) .. " is not a number")
    end
    return math.sqrt(2 / (1 + slope * slope))
  end
  args.error("nn.init.calculate_gain: unsupported nonlinearity '" .. tostring(nonlinearity) .. "'")
end

-- U(a, b), default U(0, 1).
function init.uniform_(t, a, b)
  check_tensor("uniform_", t)
  a, b = a or 0, b or 1
  return fill_with(t, core.rand(t.shape, like(t)) * (b - a) + a)
end

-- N(mean, std^2), default N(0, 1).
function init.normal_(t, mean, std)
  check_tensor("normal_", t)
  mean, std = mean or 0, std or 1
  return fill_with(t, core.randn(t.shape, like(t)) * std + mean)
end

function init.constant_(t, value)
  check_tensor("constant_", t)
  if type(value) ~= "number" then args.error("nn.init.constant_: value must be a number, got " .. tostring(value)) end
  core.no_grad(function() t:fill_(value) end)
  return t
end

function init.zeros_(t) return init.constant_(t, 0) end
function init.ones_(t) return init.constant_(t, 1) end

-- The identity matrix (2-D tensors only).
function init.eye_(t)
  check_tensor("eye_", t)
  if t:dim() ~= 2 then args.error("nn.init.eye_: expected a 2-D tensor, got shape " .. args.shape(t)) end
  return fill_with(t, core.eye(t:size(1), t:size(2), like(t)))
end

-- U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
function init.xavier_uniform_(t, gain)
  check_tensor("xavier_uniform_", t)
  local fan_in, fan_out = init.calculate_fans(t, "xavier_uniform_")
  local a = (gain or 1) * math.sqrt(2 / (fan_in + fan_out)) * math.sqrt(3)
  return init.uniform_(t, -a, a)
end

-- N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
function init.xavier_normal_(t, gain)
  check_tensor("xavier_normal_", t)
  local fan_in, fan_out = init.calculate_fans(t, "xavier_normal_")
  return init.normal_(t, 0, (gain or 1) * math.sqrt(2 / (fan_in + fan_out)))
end

local function kaiming_std(where, t, options)
  local o = args.options("nn.init." .. where, options,
                         { a = 0, mode = "fan_in", nonlinearity = "leaky_relu" },
                         { a = "number", mode = "string", nonlinearity = "string" })
  local fan_in, fan_out = init.calculate_fans(t, where)
  local fan
  if o.mode == "fan_in" then
    fan = fan_in
  elseif o.mode == "fan_out" then
    fan = fan_out
  else
    args.error(string.format("nn.init.%s: mode must be 'fan_in' or 'fan_out', got '%s'", where, tostring(o.mode)))
  end
  if fan == 0 then
    args.error(string.format("nn.init.%s: cannot initialise a tensor with a zero %s (shape %s)", where, o.mode,
                             args.shape(t)))
  end
  return init.calculate_gain(o.nonlinearity, o.a) / math.sqrt(fan)
end

-- U(-bound, bound) with bound = gain * sqrt(3 / fan); options {a = 0,
-- mode = "fan_in", nonlinearity = "leaky_relu"} as in PyTorch.
function init.kaiming_uniform_(t, options)
  check_tensor("kaiming_uniform_", t)
  local bound = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, options)
  return init.uniform_(t, -bound, bound)
end

-- N(0, std^2) with std = gain / sqrt(fan); the same options.
function init.kaiming_normal_(t, options)
  check_tensor("kaiming_normal_", t)
  return init.normal_(t, 0, kaiming_std("kaiming_normal_", t, options))
end

-- N(mean, std^2) restricted to [a, b] (defaults 0, 1, -2, 2). Drawn by
-- rejection, so the values have exactly the truncated distribution.
function init.trunc_normal_(t, mean, std, a, b)
  check_tensor("trunc_normal_", t)
  mean, std, a, b = mean or 0, std or 1, a or -2, b or 2
  if not (a < b) then
    args.error(string.format("nn.init.trunc_normal_: need a < b, got a = %s, b = %s", tostring(a), tostring(b)))
  end
  return core.no_grad(function()
    local values = core.randn(t.shape, like(t)) * std + mean
    for _ = 1, 100 do
      local outside = values:lt(a):to(t.dtype) + values:gt(b):to(t.dtype)
      if outside:sum():item() == 0 then return t:copy_(values) end
      local fresh = core.randn(t.shape, like(t)) * std + mean
      values = values * (1 - outside) + fresh * outside
    end
    args.error(string.format("nn.init.trunc_normal_: [%g, %g] holds too little of N(%g, %g^2) to sample",
                             a, b, mean, std))
  end)
end

-- A (semi-)orthogonal matrix times gain, over the tensor viewed as
-- (dim 1, everything else): Gram-Schmidt on a Gaussian matrix, which gives
-- the same distribution as PyTorch's sign-corrected QR.
function init.orthogonal_(t, gain)
  check_tensor("orthogonal_", t)
  if t:dim() < 2 then
    args.error("nn.init.orthogonal_: expected a tensor of at least 2 dims, got shape " .. args.shape(t))
  end
  local rows = t:size(1)
  local cols = t:numel() / rows
  return core.no_grad(function()
    local a = core.randn({ rows, cols }, { dtype = "float64" })
    if rows < cols then a = a:t() end
    local m, n = a:size(1), a:size(2)
    local q = core.zeros({ m, n }, { dtype = "float64" })
    for j = 1, n do
      local v = a:narrow(2, j, 1)
      if j > 1 then
        local done = q:narrow(2, 1, j - 1)
        -- Twice, so rounding leaves no component along earlier columns.
        v = v - done:matmul(done:t():matmul(v))
        v = v - done:matmul(done:t():matmul(v))
      end
      q:narrow(2, j, 1):copy_(v / (v * v):sum():sqrt())
    end
    if rows < cols then q = q:t() end
    return t:copy_(q:reshape(t.shape) * (gain or 1))
  end)
end

return init
