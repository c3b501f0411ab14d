-- accel's side of bench/linear/run.py: the median time of y = x W^T for
-- each shape, through F.linear (CPU float32: oneDNN's sgemm,
-- engine/nn/linear.h) and through x:matmul(W:t()) (LibTorch's own product:
-- OpenBLAS in Debian's LibTorch), in this process.
--   accel-run bench/linear/accel_side.lua --threads T -- SHAPES.json OUT.json
local json = require("accel.core").json
local F = accel.nn.functional
local shapes = json.read(arg[1], 1024 * 1024).shapes

local function median_ms(fn, calls)
  fn(); fn()
  local times = {}
  for i = 1, calls do
    local t = accel.time()
    fn()
    times[i] = accel.time() - t
  end
  table.sort(times)
  return times[math.floor(calls / 2) + 1] * 1000
end

local out = {}
accel.no_grad(function()
  for _, s in ipairs(shapes) do
    local x, w = accel.randn(s.rows, s.inputs), accel.randn(s.outputs, s.inputs)
    local wt = w:t()
    local y1, y2 = F.linear(x, w), x:matmul(wt)
    out[#out + 1] = {
      rows = s.rows, outputs = s.outputs, inputs = s.inputs,
      onednn_ms = median_ms(function() return F.linear(x, w) end, s.calls),
      libtorch_ms = median_ms(function() return x:matmul(wt) end, s.calls),
      max_difference = (y1 - y2):abs():max():item(),
    }
  end
end)
local f = assert(io.open(arg[2], "w"))
f:write(json.encode(out))
f:close()
