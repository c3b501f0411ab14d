-- The zero-bubble schedules' split backward (core.autograd.input_backward,
-- engine/parallel/split_backward.h): B gives the input's gradient and
-- leaves every parameter's untouched, W then gives the parameters' -- both
-- equal to one backward's within 1e-6 -- for linears, a layer norm, a
-- parameter added off the input's path and a weight used twice; W runs
-- a weight transposed once feeding two products; W runs once; what is not
-- a stage's output and input is refused.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")
local nn = accel.nn

local Block = nn.Module:extend("SplitBlock")
function Block:init()
  self.a = nn.Linear(6, 8)
  self.norm = nn.LayerNorm(8)
  self.b = nn.Linear(8, 8)
  self.offset = nn.Parameter(accel.randn(8))
end
function Block:forward(x)
  local h = self.norm(self.a(x):tanh())
  -- b twice (a weight used by two ops), and a parameter off the input's path.
  return self.b(self.b(h):tanh()) + self.offset * 2
end

local function build()
  accel.manual_seed(7)
  return Block()
end
accel.manual_seed(8)
local input, grad = accel.randn(5, 6), accel.randn(5, 8)

-- One backward.
local whole = build()
local x_whole = input:clone():requires_grad_()
whole(x_whole):backward(grad)

local split_model = build()
local x = input:clone():requires_grad_()
local y = split_model(x)
local params = split_model:parameters()
local split = core.autograd.input_backward(y, grad, x, params)
check.near(x.grad, x_whole.grad, 1e-6, "B: the input's gradient")
for name, p in split_model:named_parameters() do
  check.truthy(p.grad == nil, "B leaves " .. name .. "'s gradient alone")
end
check.truthy(split:intermediates() >= 4, "the ops holding parameters found (" .. split:intermediates() .. ")")
split:weight_backward()
check.truthy(split:weight_done(), "W done")
local theirs = {}
for name, p in whole:named_parameters() do theirs[name] = p end
for name, p in split_model:named_parameters() do
  check.near(p.grad, theirs[name].grad, 1e-6, "W: " .. name .. "'s gradient")
end
check.raises(function() split:weight_backward() end, "W twice", "the weight gradient was run already")

-- A weight transposed once and used by two products: the transpose's
-- node is fed by both, in W.
local Shared = nn.Module:extend("SplitShared")
function Shared:init()
  self.w = nn.Parameter(accel.randn(6, 6))
  self.c = nn.Linear(6, 6)
end
function Shared:forward(x)
  local wt = self.w:t()
  return self.c(x:matmul(wt):tanh():matmul(wt))
end
local function build_shared()
  accel.manual_seed(9)
  return Shared()
end
local shared_whole, xs_whole = build_shared(), input:clone():requires_grad_()
shared_whole(xs_whole):backward(grad:narrow(2, 1, 6))
local shared, xs = build_shared(), input:clone():requires_grad_()
local s_split = core.autograd.input_backward(shared(xs), grad:narrow(2, 1, 6), xs, shared:parameters())
check.near(xs.grad, xs_whole.grad, 1e-6, "shared transpose, B: the input's gradient")
check.equal(s_split:intermediates(), 4, "shared transpose: two products, the linear's product and its bias's sum")
s_split:weight_backward()
check.near(shared.w.grad, shared_whole.w.grad, 1e-6, "shared transpose, W: the weight's gradient")
check.near(shared.c.weight.grad, shared_whole.c.weight.grad, 1e-6, "shared transpose, W: the linear's")

-- A loss (no gradient given: ones), and refusals.
local m2 = build()
local x2 = input:clone():requires_grad_()
local loss = m2(x2):pow(2):mean()
local s2 = core.autograd.input_backward(loss, nil, x2, m2:parameters())
s2:weight_backward()
local m3 = build()
local x3 = input:clone():requires_grad_()
m3(x3):pow(2):mean():backward()
check.near(x2.grad, x3.grad, 1e-6, "a loss's split: the input's gradient")
check.near(m2.b.weight.grad, m3.b.weight.grad, 1e-6, "a loss's split: a weight's gradient")
check.raises(function() core.autograd.input_backward(input, grad, x, params) end, "an output without a graph",
             "the output does not depend on anything that requires grad")
check.raises(function() core.autograd.input_backward(build()(x:detach() * 1), grad, x:detach() * 1, params) end,
             "an input that is not a leaf", "the input must be a leaf that requires grad")
check.done("split backward")
