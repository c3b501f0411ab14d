-- Autograd from Lua: gradients match finite differences; backward with a
-- gradient, accumulation across backward calls, detach, no_grad and
-- enable_grad, and the errors of misuse.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local gradcheck = dofile(arg[0]:match("(.*/)") .. "helpers/gradcheck.lua")
local F = accel.nn.functional

accel.set_seed(1)

local w = accel.randn(4, 3, { dtype = accel.float64 })
local b = accel.randn(4, { dtype = accel.float64 })
local target = accel.LongTensor({ 2, 4 })
gradcheck(check, "linear + cross_entropy", function(x) return F.cross_entropy(F.linear(x, w, b), target) end,
          accel.randn(2, 3))
gradcheck(check, "mse_loss", function(x) return F.mse_loss(x:tanh(), accel.ones(2, 3, { dtype = accel.float64 })) end,
          accel.randn(2, 3))
gradcheck(check, "matmul, relu, sum", function(x) return accel.matmul(x, x:t()):relu():sum() end, accel.randn(3, 3))
gradcheck(check, "softmax, log, mean", function(x) return F.log_softmax(x, -1):select(2, 1):mean() end,
          accel.randn(2, 4))
-- a few ops whose backward is easy to get wrong
gradcheck(check, "gather, index_select", function(x)
  return x:gather(2, accel.LongTensor({ { 3, 1 }, { 2, 2 } })):sum() + x:index_select(2, accel.LongTensor({ 1, 1 })):pow(2):sum()
end, accel.randn(2, 3))
gradcheck(check, "subscripts", function(x) return (x[{ {}, { 2, 3 } }] * x[{ 1 }][{ { 1, 2 } }]):sum() end,
          accel.randn(2, 3))
gradcheck(check, "where, clamp, abs", function(x)
  return accel.where(x:gt(0), x:clamp(nil, 0.5), x:abs() * 3):sum()
end, accel.tensor({ { 0.3, -0.7 }, { 0.9, -0.2 } }))
gradcheck(check, "std, norm, logsumexp", function(x) return x:std(2):sum() + x:norm() + x:logsumexp(1):sum() end,
          accel.randn(3, 4))
gradcheck(check, "max along a dim, cumsum, prod", function(x)
  local values = x:max(2)
  return values:sum() + x:cumsum(1):sum() + x:prod(2):sum()
end, accel.randn(3, 3))
gradcheck(check, "einsum, bmm", function(x)
  return accel.einsum("bij,bkj->bik", x, x):sum() + x:bmm(x:transpose(2, 3)):mean()
end, accel.randn(2, 2, 3))

-- backward accumulates into .grad until it is cleared
local x = accel.ones(3, { requires_grad = true })
;(x * 2):sum():backward()
;(x * 3):sum():backward()
check.near(x.grad, { 5, 5, 5 }, 0, "grads accumulate across backward calls")
x.grad = nil
check.equal(x.grad, nil, "grad can be cleared")
;(x * x):sum():backward()
check.near(x.grad, { 2, 2, 2 }, 0, "a cleared grad starts again")
x.grad:zero_()
;(x * 4):sum():backward()
check.near(x.grad, { 4, 4, 4 }, 0, "zeroing the grad in place also restarts it")
-- an assigned gradient must be one backward can accumulate into, as in PyTorch
x.grad = accel.full({ 3 }, 7)
check.near(x.grad, { 7, 7, 7 }, 0, "a gradient of the tensor's shape and dtype can be assigned")
check.raises(function() x.grad = accel.ones(4) end, "a gradient of another shape is refused, both named",
             "assigned grad has shape [4]", "the tensor has shape [3]")
check.raises(function() x.grad = accel.ones(3, { dtype = accel.float64 }) end, "so is one of another dtype",
             "assigned grad is float64", "the tensor is float32")
check.near(x.grad, { 7, 7, 7 }, 0, "and the gradient held stays")

-- backward with an explicit gradient, and retain_graph for a second pass
local y = accel.ones(2, { requires_grad = true })
local out = y * 4
out:backward(accel.tensor({ 1, 0.5 }), true)
check.near(y.grad, { 4, 2 }, 0, "backward(gradient)")
out:backward(accel.ones(2))
check.near(y.grad, { 8, 6 }, 0, "retain_graph allows a second backward through the same graph")
check.raises(function() out:backward(accel.ones(2)) end, "graph freed after backward",
             "accel.backward", "second time")
check.raises(function() (y * 1):backward() end, "non-scalar backward", "accel.backward", "one-element",
             "shape [2]")
check.raises(function() (y * 1):backward(accel.ones(3)) end, "gradient shape", "accel.backward", "float32[3]")
check.raises(function() accel.ones(2):sum():backward() end, "nothing requires grad", "accel.backward",
             "does not require grad")

-- retain_grad keeps the gradient of a non-leaf
local leaf = accel.tensor({ 1, 2 }, { dtype = accel.float32, requires_grad = true })
local middle = (leaf * 3):retain_grad()
;(middle * middle):sum():backward()
check.near(middle.grad, { 6, 12 }, 0, "retain_grad")
check.near(leaf.grad, { 18, 36 }, 0, "leaf grad through the chain rule")
check.equal(middle.is_leaf, false, "is_leaf of a result")

-- no_grad returns the function's results and turns recording off inside only
local inside, result
result = accel.no_grad(function()
  inside = accel.is_grad_enabled()
  return (x * 2)
end)
check.equal(inside, false, "no_grad disables recording inside")
check.equal(result.requires_grad, false, "results made under no_grad need no grad")
check.equal(accel.is_grad_enabled(), true, "no_grad restores the mode")
local first, second = accel.no_grad(function() return 1, 2 end)
check.equal(first + second, 3, "no_grad returns every result")
pcall(accel.no_grad, function() error("boom") end)
check.equal(accel.is_grad_enabled(), true, "no_grad restores the mode after an error")
local err = check.raises(function() accel.no_grad(function() error("boom") end) end, "errors pass through", "boom")
check.truthy(err:find("test_autograd.lua:%d+:"), "the error keeps its location: " .. err)
accel.no_grad(function()
  local enabled = accel.enable_grad(function()
    check.equal(accel.is_grad_enabled(), true, "enable_grad inside no_grad")
    return (x * 2).requires_grad
  end)
  check.equal(enabled, true, "enable_grad records")
  check.equal(accel.is_grad_enabled(), false, "enable_grad restores no_grad")
end)
-- no_grad is how a recipe updates parameters in place
local p = accel.tensor({ 1, -1 }, { dtype = accel.float32, requires_grad = true })
;(p * p):sum():backward()
accel.no_grad(function() p:sub_(p.grad * 0.25) end)
check.near(p, { 0.5, -0.5 }, 0, "an in-place update under no_grad")
check.raises(function() p:add_(1) end, "in-place on a leaf that requires grad", "accel.add_", "leaf")

-- detach shares storage but leaves the graph
local d = p:detach()
check.equal(d.requires_grad, false, "detach")
d[1] = 7
check.equal(p[1]:item(), 7, "detach shares storage")
local q = (p * 2)
check.truthy(rawequal(q:detach_(), q), "detach_ returns its receiver")
check.equal(q.requires_grad, false, "detach_ leaves the graph in place")
check.equal(q.is_leaf, true, "a detached tensor is a leaf")
check.equal(x.is_leaf, true, "is_leaf")
local r = accel.zeros(2)
check.truthy(rawequal(r:requires_grad_(), r), "requires_grad_ returns its receiver")
check.equal(r.requires_grad, true, "requires_grad_")
r.requires_grad = false
check.equal(r.requires_grad, false, "requires_grad is settable")

check.done("test_autograd")
