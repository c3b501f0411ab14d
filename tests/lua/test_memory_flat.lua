-- A 60,000-step training loop on small tensors keeps its resident memory
-- flat: tensor handles are collected as they become garbage. The resident
-- size climbs by up to 10% over the first 10,000 to 25,000 steps (the
-- allocators' and the Lua heap's pools filling) and then holds, so the
-- check compares the lowest sample of the last 5,000 steps with the
-- highest of steps 25,000 to 30,000: a leak of half a KiB a step would
-- raise every late sample by 15 MiB (7%).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional

local resident_bytes = dofile(arg[0]:match("(.*/)") .. "helpers/resident_bytes.lua")

accel.set_seed(0)
local model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
local x, y = accel.randn(8, 16), accel.randint(1, 5, { 8 })

local STEPS, SAMPLE = 60000, 500
local early_high, late_low, handles_early = 0, math.huge, nil
for step = 1, STEPS do
  local loss = F.cross_entropy(model(x), y)
  loss:backward()
  opt:step()
  opt:zero_grad()
  local _ = (x * 2 + 1):sum():item()  -- plain temporaries too
  if step % SAMPLE == 0 and (step > 25000 and step <= 30000 or step > STEPS - 5000) then
    collectgarbage()
    local resident = resident_bytes()
    if step <= 30000 then
      early_high = math.max(early_high, resident)
      handles_early = handles_early or accel.live_tensors()
    else
      late_low = math.min(late_low, resident)
    end
  end
end
collectgarbage()
print(string.format("resident at steps 25,000-30,000 at most %.1f MiB, at steps 55,000-60,000 at least %.1f MiB; "
                    .. "live tensors %d -> %d", early_high / 2 ^ 20, late_low / 2 ^ 20, handles_early,
                    accel.live_tensors()))
check.truthy(late_low <= early_high * 1.05, "resident memory within 5% of the earlier samples'")
check.truthy(accel.live_tensors() <= handles_early, "no tensor handles leak")

check.done("test_memory_flat")
