-- What bench/live's Lua benchmarks share (loaded with dofile, next to
-- them): the 100M-parameter model of bench/checkpoint_io.lua with AdamW,
-- a timer and a median.
local nn, optim = accel.nn, accel.optim

local timing = {}

-- 10 x Linear(3162, 3162): 99.99M parameters, prepared with AdamW, and a
-- training step of it (a batch of 4). Returns model, opt, step.
function timing.model_100m(acc)
  accel.set_seed(0)
  local layers = {}
  for _ = 1, 10 do layers[#layers + 1] = nn.Linear(3162, 3162) end
  local model = nn.Sequential(unpack(layers))
  local opt
  model, opt = acc:prepare(model, optim.AdamW(model:parameters(), { lr = 1e-4 }))
  local input = accel.randn(4, 3162)
  local function step()
    acc:backward(model(input):pow(2):mean())
    opt:step()
    opt:zero_grad()
  end
  return model, opt, step
end

function timing.seconds(fn)
  local start = accel.time()
  fn()
  return accel.time() - start
end

function timing.median(values)
  local sorted = {}
  for i, v in ipairs(values) do sorted[i] = v end
  table.sort(sorted)
  local n = #sorted
  if n % 2 == 1 then return sorted[(n + 1) / 2] end
  return (sorted[n / 2] + sorted[n / 2 + 1]) / 2
end

return timing
