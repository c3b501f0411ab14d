-- Gradient checks for the Lua API tests: autograd's gradient of a scalar
-- function against central finite differences, in float64.
--   local gradcheck = dofile(arg[0]:match("(.*/)") .. "helpers/gradcheck.lua")
--   gradcheck(check, "name", function(x) return loss(x) end, accel.randn(2, 3))
local function numeric_grad(fn, x, eps)
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

-- Checks d fn(x) / dx at x (made float64) and returns the gradient.
return function(check, name, fn, x, tolerance)
  x = x:double():detach():requires_grad_()
  fn(x):backward()
  local grad = x.grad
  check.near(grad:view(-1), numeric_grad(fn, x, 1e-6), tolerance or 1e-5,
             name .. " gradient vs finite differences")
  return grad
end
