-- The zero-bubble schedules' split backward (core.autograd.input_backward,
-- engine/parallel/split_backward.h) against one backward, on one process:
-- B (the input's gradient) and W (the parameters') each cost about half of
-- a stack of linears' backward, since W runs each linear for its weight's
-- gradient alone; B + W about one backward. What the zero-bubble schedule
-- gains rests on it: W fills the bubble only if it is a part of the work,
-- not the work again.
--   accel-run bench/parallel/split_backward.lua --threads 1 -- [width=1024] [rows=512] [layers=8] [repeats=9]
local nn = accel.nn
local core = require("accel.core")

local bench_options = dofile(arg[0]:match("(.*/)") .. "bench_options.lua")
local median, timed = bench_options.median, bench_options.timed
local o = bench_options.parse("split_backward.lua", { width = 1024, rows = 512, layers = 8, repeats = 9 })

accel.manual_seed(1)
local model = nn.Sequential()
for _ = 1, o.layers do model:append(nn.Linear(o.width, o.width)) end
local params = model:parameters()
local input, grad = accel.randn(o.rows, o.width), accel.randn(o.rows, o.width)

local full, b, w = {}, {}, {}
for r = 0, o.repeats do
  for _, p in ipairs(params) do p.grad = nil end
  local x = input:clone():requires_grad_()
  local y = model(x)
  local t_full = timed(function() y:backward(grad) end)
  for _, p in ipairs(params) do p.grad = nil end
  x = input:clone():requires_grad_()
  y = model(x)
  local split
  local t_b = timed(function() split = core.autograd.input_backward(y, grad, x, params) end)
  local t_w = timed(function() split:weight_backward() end)
  if r > 0 then  -- the first warms up
    full[#full + 1], b[#b + 1], w[#w + 1] = t_full, t_b, t_w
  end
end
local f, tb, tw = median(full), median(b), median(w)
print(string.format("%d linears %d x %d, %d rows, one thread, median of %d", o.layers, o.width, o.width, o.rows,
                    o.repeats))
print("")
print("| backward | ms | / one backward |")
print("|---|---|---|")
print(string.format("| one backward | %.1f | 1.00 |", f * 1000))
print(string.format("| B (the input's gradient) | %.1f | %.2f |", tb * 1000, tb / f))
print(string.format("| W (the parameters') | %.1f | %.2f |", tw * 1000, tw / f))
print(string.format("| B + W | %.1f | %.2f |", (tb + tw) * 1000, (tb + tw) / f))
