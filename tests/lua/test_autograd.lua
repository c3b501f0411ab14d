-- Autograd from Lua: gradients match finite differences; no_grad, detach,
-- gradient accumulation across backward calls.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local F = accel.nn.functional

accel.set_seed(1)

-- Central differences of a scalar function of x, in float64.
local function numeric_grad(fn, x, eps)
  eps = eps or 1e-6
  local flat = x:view(-1)
  local out = {}
  accel.no_grad(function()
    for i = 1, flat:numel() do
      local saved = flat[i]:item()
      flat[i] = saved + eps
      local up = fn(x):item()
      flat[i] = saved - eps
      local down = fn(x):item()
      flat[i] = saved
      out[i] = (up - down) / (2 * eps)
    end
  end)
  return out
end

local function gradcheck(name, fn, x)
  x = x:double():requires_grad_()
  x.grad = nil
  fn(x):backward()
  check.near(x.grad:view(-1), numeric_grad(fn, x), 1e-5, name .. " gradient vs finite differences")
end

local w = accel.randn(4, 3, { dtype = accel.float64 })
local b = accel.randn(4, { dtype = accel.float64 })
local target = accel.tensor({ 2, 4 })
gradcheck("linear + cross_entropy", function(x) return F.cross_entropy(F.linear(x, w, b), target) end,
          accel.randn(2, 3))
gradcheck("mse_loss", function(x) return F.mse_loss(x:tanh(), accel.ones(2, 3, { dtype = accel.float64 })) end,
          accel.randn(2, 3))
gradcheck("matmul, relu, sum", function(x) return accel.matmul(x, x:t()):relu():sum() end, accel.randn(3, 3))
gradcheck("softmax, log, mean", function(x) return F.log_softmax(x, -1):select(2, 1):mean() end, accel.randn(2, 4))

-- backward accumulates into .grad until it is cleared
local x = accel.ones(3, { requires_grad = true })
;(x * 2):sum():backward()
;(x * 3):sum():backward()
check.near(x.grad, { 5, 5, 5 }, 0, "grads accumulate across backward calls")
x.grad = nil
check.equal(x.grad, nil, "grad can be cleared")

-- backward with an explicit gradient
local y = accel.ones(2, { requires_grad = true })
;(y * 4):backward(accel.tensor({ 1.0, 0.5 }))
check.near(y.grad, { 4, 2 }, 0, "backward(gradient)")
check.raises(function() (y * 1):backward() end, "non-scalar backward", "one-element")

-- no_grad returns the function's results and turns recording off inside only
local inside, result = nil, nil
result = accel.no_grad(function()
  inside = accel.is_grad_enabled()
  return (x * 2)
end)
check.equal(inside, false, "no_grad disables recording inside")
check.equal(result.requires_grad, false, "results made under no_grad need no grad")
check.equal(accel.is_grad_enabled(), true, "no_grad restores the mode")
pcall(accel.no_grad, function() error("boom") end)
check.equal(accel.is_grad_enabled(), true, "no_grad restores the mode after an error")

check.equal((x * 2):detach().requires_grad, false, "detach")
check.equal(x.is_leaf, true, "is_leaf")

check.done("test_autograd")
