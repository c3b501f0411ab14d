-- Mixed precision "fp8": every nn.Linear whose sizes the GPU's float8
-- products take (in and out features multiples of 16) computes in float8
-- (engine/nn/float8_linear.h: e4m3 forward, e5m2 gradients, dynamic
-- per-tensor scaling, as torchao's Float8Linear); everything else runs
-- under bfloat16 autocast, as "bf16". The weights stay as they are (float32
-- masters), so optimizers, checkpoints and save_model see no difference.
local core = require("accel.core")
local Module = require("accel.nn.module")
local Linear = require("accel.nn.linear")

local float8 = {}

local function float8_forward(self, x)
  return core.functional.float8_linear(x, self.weight, self.bias)
end
-- As Linear's: nothing of its input or output is kept once it returns.
Module.mark_forward_keeps_no_tensors({ forward = float8_forward })

-- Refuses "fp8" where this process cannot compute in float8, saying why.
function float8.check(device, fail)
  if device:sub(1, 4) ~= "cuda" then
    fail("mixed_precision = 'fp8' computes on a GPU's float8 units; this Accelerator computes on the CPU")
  end
  local why = core.cuda.float8_unavailable(tonumber(device:match(":(%d+)$")) or 0)
  if why then fail("mixed_precision = 'fp8': " .. why) end
end

-- Puts the float8 forward on each Linear of `model` that fits; returns how
-- many it converted.
function float8.convert(model)
  local converted = 0
  for _, m in ipairs(model:modules()) do
    if getmetatable(m) == Linear and m.in_features % 16 == 0 and m.out_features % 16 == 0 then
      rawset(m, "forward", float8_forward)
      converted = converted + 1
    end
  end
  return converted
end

return float8
