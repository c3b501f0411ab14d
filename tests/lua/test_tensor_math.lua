-- Arithmetic, pointwise math, comparisons and logic, with broadcasting and
-- in-place forms. Expected values are hand-computed, or from Lua's math
-- library, or recorded once from PyTorch 1.13 with the snippet shown.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")

local f64 = { dtype = accel.float64 }
local x = accel.tensor({ { 0.5, -1.25, 2.0 }, { 3.0, -0.75, 1.5 } }, f64)
local p = accel.tensor({ 0.2, 0.5, 0.9 }, f64)

-- Each pointwise function against the same function of each element.
local function elementwise(values, fn)
  local out = {}
  for i, v in ipairs(values) do out[i] = fn(v) end
  return out
end
local pv = { 0.2, 0.5, 0.9 }
local from_math = {
  exp = math.exp, log = math.log, sqrt = math.sqrt, sin = math.sin, cos = math.cos, tan = math.tan,
  asin = math.asin, acos = math.acos, atan = math.atan, sinh = math.sinh, cosh = math.cosh,
  tanh = math.tanh, abs = math.abs, neg = function(v) return -v end,
  log1p = function(v) return math.log(1 + v) end,
  expm1 = function(v) return math.exp(v) - 1 end,
  log2 = function(v) return math.log(v) / math.log(2) end,
  log10 = function(v) return math.log10(v) end,
  exp2 = function(v) return 2 ^ v end,
  rsqrt = function(v) return 1 / math.sqrt(v) end,
  square = function(v) return v * v end,
  reciprocal = function(v) return 1 / v end,
  sigmoid = function(v) return 1 / (1 + math.exp(-v)) end,
  relu = function(v) return math.max(v, 0) end,
}
for name, fn in pairs(from_math) do
  check.near(p[name](p), elementwise(pv, fn), 1e-12, name)
  check.near(accel[name](p), elementwise(pv, fn), 1e-12, "accel." .. name)
end
-- torch.erf / erfc / erfinv of tensor([0.2, 0.5, 0.9], dtype=torch.float64)
check.near(p:erf(), { 0.22270258921047847, 0.5204998778130465, 0.7969082124228322 }, 1e-12, "erf")
check.near(p:erfc(), { 1 - 0.22270258921047847, 1 - 0.5204998778130465, 1 - 0.7969082124228322 }, 1e-12, "erfc")
check.near(accel.tensor({ 0.5 }, f64):erfinv(), { 0.4769362762044699 }, 1e-12, "erfinv")

-- Rounding: halves go to even (torch.round), and floor/ceil/trunc/frac.
local r = accel.tensor({ -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.75, -1.75 })
check.near(r:round(), { -2, -2, 0, 0, 2, 2, 2, -2 }, 0, "round half to even")
check.near(r:floor(), { -3, -2, -1, 0, 1, 2, 1, -2 }, 0, "floor")
check.near(r:ceil(), { -2, -1, 0, 1, 2, 3, 2, -1 }, 0, "ceil")
check.near(r:trunc(), { -2, -1, 0, 0, 1, 2, 1, -1 }, 0, "trunc")
check.near(r:frac(), { -0.5, -0.5, -0.5, 0.5, 0.5, 0.5, 0.75, -0.75 }, 0, "frac")
check.near(accel.tensor({ 1.2345, -2.5678 }, f64):round(2), { 1.23, -2.57 }, 1e-12, "round(decimals)")
check.near(x:sign(), { { 1, -1, 1 }, { 1, -1, 1 } }, 0, "sign")

-- Binary ops: numbers on either side, broadcasting, PyTorch's dtype rules.
local col = accel.tensor({ { 10 }, { 20 } }, f64)
check.near(x + col, { { 10.5, 8.75, 12 }, { 23, 19.25, 21.5 } }, 1e-12, "(2x3) + (2x1) broadcasts")
check.near(x - p, { { 0.3, -1.75, 1.1 }, { 2.8, -1.25, 0.6 } }, 1e-12, "(2x3) - (3) broadcasts")
check.near(x:add(p, 2), { { 0.9, -0.25, 3.8 }, { 3.4, 0.25, 3.3 } }, 1e-12, "add with alpha")
check.near(x:sub(1, 0.5), { { 0, -1.75, 1.5 }, { 2.5, -1.25, 1 } }, 1e-12, "sub a number with alpha")
check.near(2 / p, { 10, 4, 2 / 0.9 }, 1e-12, "number / tensor")
check.near(p ^ 2.5, { 0.01788854381999832, 0.1767766952966369, 0.7684334714209162 }, 1e-12, "t ^ number")
check.near(2 ^ accel.tensor({ 1, 2, 3 }), { 2, 4, 8 }, 0, "number ^ t")
local ints = accel.LongTensor({ -7, -3, 3, 7 })
-- torch.remainder(tensor([-7, -3, 3, 7]), 3) and torch.fmod(...)
check.near(ints % 3, { 2, 0, 0, 1 }, 0, "% is remainder with the divisor's sign")
check.near(ints:fmod(3), { -1, 0, 0, 1 }, 0, "fmod keeps the dividend's sign")
check.equal((ints % 3).dtype, accel.int64, "int % int stays int64")
check.near(ints:div(2, { rounding_mode = "floor" }), { -4, -2, 1, 3 }, 0, "div floor")
check.near(ints:div(2, { rounding_mode = "trunc" }), { -3, -1, 1, 3 }, 0, "div trunc")
check.near(ints:floor_divide(2), { -4, -2, 1, 3 }, 0, "floor_divide")
check.equal((ints + 1.5).dtype, accel.float32, "int + fractional number promotes to float32")
check.equal((ints:float() + ints).dtype, accel.float32, "float32 + int64 is float32")
check.near(x:maximum(p), { { 0.5, 0.5, 2 }, { 3, 0.5, 1.5 } }, 0, "maximum broadcasts")
check.near(x:minimum(0), { { 0, -1.25, 0 }, { 0, -0.75, 0 } }, 0, "minimum with a number")
check.near(x:clamp(-1, 1.6), { { 0.5, -1, 1.6 }, { 1.6, -0.75, 1.5 } }, 1e-12, "clamp")
check.near(x:clamp(nil, 0), { { 0, -1.25, 0 }, { 0, -0.75, 0 } }, 0, "clamp with only a maximum")
check.near(x:clamp(p), { { 0.5, 0.5, 2 }, { 3, 0.5, 1.5 } }, 0, "clamp to a tensor bound")
-- torch.atan2(tensor([1., -1.]), tensor([-1., -1.]))
check.near(accel.atan2(accel.tensor({ 1.0, -1.0 }, f64), accel.tensor({ -1.0, -1.0 }, f64)),
           { 3 * math.pi / 4, -3 * math.pi / 4 }, 1e-12, "atan2")
check.near(accel.tensor({ 0, 1 }):lerp(accel.tensor({ 10, 3 }), 0.25), { 2.5, 1.5 }, 0, "lerp")
check.near(accel.tensor({ 1, 2 }):addcmul(accel.tensor({ 3, 4 }), accel.tensor({ 2, 8 }), 0.5), { 4, 18 }, 0, "addcmul")
check.near(accel.tensor({ 1, 2 }):addcdiv(accel.tensor({ 3, 4 }), accel.tensor({ 2, 8 }), 0.5), { 1.75, 2.25 }, 0, "addcdiv")
check.near(accel.tensor({ 0 / 0, 1 / 0, -1 / 0, 2 }, f64):nan_to_num(0, 100, -100), { 0, 100, -100, 2 }, 0,
           "nan_to_num")

-- In place: the result is the same tensor (the same Lua value).
local y = x:clone()
check.truthy(rawequal(y:add_(1), y), "add_ returns its receiver")
check.near(y, { { 1.5, -0.25, 3 }, { 4, 0.25, 2.5 } }, 1e-12, "add_")
y:mul_(2):sub_(p, 10):div_(4)
check.near(y, { { 0.25, -1.375, -0.75 }, { 1.5, -1.125, -1 } }, 1e-12, "chained in place: ((x + 1) * 2 - 10 p) / 4")
y:clamp_(0, 1)
check.near(y, { { 0.25, 0, 0 }, { 1, 0, 0 } }, 1e-12, "clamp_")
local z = p:clone()
z:exp_():log_():sqrt_():pow_(2)
check.near(z, pv, 1e-12, "exp_ log_ sqrt_ pow_")
check.near(p:clone():neg_():abs_():reciprocal_(), { 5, 2, 1 / 0.9 }, 1e-12, "neg_ abs_ reciprocal_")
check.near(accel.tensor({ -1.5, 0.5 }):relu_(), { 0, 0.5 }, 0, "relu_")
check.near(accel.tensor({ 1, 2 }):addcmul_(accel.tensor({ 3, 4 }), accel.tensor({ 2, 8 })), { 7, 34 }, 0, "addcmul_")
check.near(accel.tensor({ 0, 1 }):lerp_(accel.tensor({ 10, 3 }), 0.5), { 5, 2 }, 0, "lerp_")
check.raises(function() ints:clone():add_(0.5) end, "int += float is refused", "accel.add_", "int64[4]")

-- Comparisons and logic give bool tensors.
check.near(x:ge(1.5), { { false, false, true }, { true, false, true } }, 0, "ge")
check.near(x:lt(p), { { false, true, false }, { false, true, false } }, 0, "lt broadcasts")
check.near(x:eq(0.5), { { true, false, false }, { false, false, false } }, 0, "eq")
check.near(x:ne(0.5), { { false, true, true }, { true, true, true } }, 0, "ne")
check.near(x:le(-0.75), { { false, true, false }, { false, true, false } }, 0, "le")
local a, b = accel.tensor({ true, true, false, false }), accel.tensor({ true, false, true, false })
check.near(a:logical_and(b), { true, false, false, false }, 0, "logical_and")
check.near(a:logical_or(b), { true, true, true, false }, 0, "logical_or")
check.near(a:logical_xor(b), { false, true, true, false }, 0, "logical_xor")
check.near(a:logical_not(), { false, false, true, true }, 0, "logical_not")
check.near(accel.tensor({ 0, 2, 0 }):logical_or(0), { false, true, false }, 0, "logical ops take numbers")
check.near(accel.where(x:gt(1), x, 0), { { 0, 0, 2 }, { 3, 0, 1.5 } }, 0, "where with a number")
check.near(x:gt(1):where(1, -1), { { -1, -1, 1 }, { 1, -1, 1 } }, 0, "mask:where(a, b)")
check.near(accel.where(p:gt(0.3), p, col), { { 10, 0.5, 0.9 }, { 20, 0.5, 0.9 } }, 1e-12, "where broadcasts")
check.raises(function() accel.where(x, x, 0) end, "where needs a bool condition", "accel.where", "float64")
local special = accel.tensor({ 0 / 0, 1 / 0, 1 })
check.near(special:isnan(), { true, false, false }, 0, "isnan")
check.near(special:isinf(), { false, true, false }, 0, "isinf")
check.near(special:isfinite(), { false, false, true }, 0, "isfinite")
check.equal(accel.allclose(p, p + 1e-9), true, "allclose")
check.equal(accel.allclose(p, p + 1e-3), false, "allclose refuses a real difference")
check.equal(accel.allclose(p, p + 1e-3, { atol = 1e-2 }), true, "allclose with atol")
check.near(p:isclose(p + 1e-3, { rtol = 0, atol = 2e-3 }), { true, true, true }, 0, "isclose")
check.equal(accel.allclose(special, special), false, "a NaN is not close to itself by default")
check.equal(accel.allclose(special, special, { equal_nan = true }), true, "allclose with equal_nan")
check.raises(function() return accel.allclose(p, p, { equal_nan = "yes" }) end, "equal_nan must be a boolean",
             "option 'equal_nan'", "boolean")
check.equal(accel.equal(p, p:clone()), true, "equal")
check.equal(accel.equal(p, p * 2), false, "equal sees different values")

-- Products.
local m = accel.tensor({ { 1, 2 }, { 3, 4 } }, f64)
check.near(m:matmul(m), { { 7, 10 }, { 15, 22 } }, 0, "matmul")
check.near(m:mm(m:t()), { { 5, 11 }, { 11, 25 } }, 0, "mm")
check.near(m:mv(accel.tensor({ 1, -1 }, f64)), { -1, -1 }, 0, "mv")
check.near(accel.tensor({ 1, 2, 3 }):dot(accel.tensor({ 4, 5, 6 })), 32, 0, "dot")
check.near(accel.outer(accel.tensor({ 1, 2 }), accel.tensor({ 3, 4 })), { { 3, 4 }, { 6, 8 } }, 0, "outer")
local batch = accel.stack({ m, m * 2 })
check.near(batch:bmm(batch), { { { 7, 10 }, { 15, 22 } }, { { 28, 40 }, { 60, 88 } } }, 0, "bmm")
check.near(accel.matmul(batch, accel.tensor({ 1, 1 }, f64)), { { 3, 7 }, { 6, 14 } }, 0, "matmul broadcasts a vector")
-- torch.einsum("ij,kj->ik", x, x)
check.near(accel.einsum("ij,kj->ik", x, x), { { 5.8125, 5.4375 }, { 5.4375, 11.8125 } }, 1e-12, "einsum")
check.near(accel.einsum("bij,bjk->bik", { batch, batch }), batch:bmm(batch), 0, "einsum with a table")
check.near(accel.einsum("ii", m), 5, 0, "einsum trace")

-- Bad calls name the function and the offending value.
check.raises(function() return x + accel.ones(4) end, "broadcast mismatch", "accel.__add", "float64[2, 3]",
             "float32[4]")
check.raises(function() return m:matmul(accel.ones(3, 3, f64)) end, "matmul shapes", "accel.matmul", "2x2", "3x3")
check.raises(function() return m:mm(accel.ones(2, 2)) end, "dtype mismatch", "accel.mm", "float64[2, 2]", "float32[2, 2]")
check.raises(function() return x:add("one") end, "wrong argument type", "accel.add", "argument 2", "string 'one'")
check.raises(function() return x:div(2, { rounding_mode = "up" }) end, "bad option value", "accel.div", "'up'")
check.raises(function() return x:div(2, { rounding = "floor" }) end, "unknown option", "accel.div", "'rounding'")
check.raises(function() return accel.einsum("ij,jk->ik", m) end, "einsum operand count", "accel.einsum")
check.raises(function() return x:clamp("a") end, "clamp bound type", "accel.clamp", "string 'a'")

check.done("test_tensor_math")
