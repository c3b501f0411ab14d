-- A 20,000-step training loop on small tensors keeps its resident memory
-- within 10% of where it was after 1,000 steps: tensor handles are
-- collected as they become garbage.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional

local resident_bytes = dofile(arg[0]:match("(.*/)") .. "helpers/resident_bytes.lua")

accel.set_seed(0)
local model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
local x, y = accel.randn(8, 16), accel.randint(1, 5, { 8 })

local after_warmup, handles_after_warmup
for step = 1, 20000 do
  local loss = F.cross_entropy(model(x), y)
  loss:backward()
  opt:step()
  opt:zero_grad()
  local _ = (x * 2 + 1):sum():item()  -- plain temporaries too
  if step == 1000 then
    collectgarbage()
    after_warmup, handles_after_warmup = resident_bytes(), accel.live_tensors()
  end
end
collectgarbage()
local final = resident_bytes()
print(string.format("resident after 1,000 steps %.1f MiB, after 20,000 %.1f MiB; live tensors %d -> %d",
                    after_warmup / 2 ^ 20, final / 2 ^ 20, handles_after_warmup, accel.live_tensors()))
check.truthy(final <= after_warmup * 1.10, "resident memory within 10% of step 1,000")
check.truthy(accel.live_tensors() <= handles_after_warmup, "no tensor handles leak")

check.done("test_memory_flat")
