-- The recipe `accel-run test` runs: every collective a training run uses,
-- checked on the configured ranks with values each rank can predict. The
-- main process prints one "pass" or "FAIL" line per check, with what every
-- failing rank saw; the run fails when any check failed on any rank.
local core = require("accel.core")
local args = require("accel.util.args")
local nn = accel.nn

local dist = core.dist
local acc = accel.Accelerator{}
local rank, size = acc.process_index, acc.num_processes
local device = acc.device
-- One rank communicates only over a group the launch named (--backend nccl).
local communicates = size > 1 or acc.backend == "nccl"

-- A tensor of these values on the device the ranks compute on.
local function on_device(values)
  return accel.tensor(values):float():to(device)
end

local function close(t, expected)
  return (t:cpu() - expected):abs():max():item() < 1e-5
end

-- Each check returns true, or false and what this rank saw.
local checks = {
  { "all_reduce sum", function()
      local t = on_device({ rank + 1, 2 * (rank + 1) })
      if communicates then dist.all_reduce(t, "sum") end
      local total = size * (size + 1) / 2
      return close(t, accel.tensor({ total, 2 * total })), tostring(t:totable()[1])
    end },
  { "all_reduce mean", function()
      local t = on_device({ rank, -rank })
      if communicates then dist.all_reduce(t, "mean") end
      local mean = (size - 1) / 2
      return close(t, accel.tensor({ mean, -mean })), tostring(t:totable()[1])
    end },
  { "all_reduce max", function()
      local t = on_device({ rank, -rank })
      if communicates then dist.all_reduce(t, "max") end
      return close(t, accel.tensor({ size - 1, 0 })), tostring(t:totable()[1])
    end },
  { "broadcast from the first and the last rank", function()
      local first = acc:broadcast(accel.full({ 3 }, rank + 10):to(device), 0)
      local last = acc:broadcast(accel.full({ 3 }, rank + 20):to(device), size - 1)
      local ok = close(first, accel.full({ 3 }, 10)) and close(last, accel.full({ 3 }, size + 19))
      return ok, first:totable()[1] .. ", " .. last:totable()[1]
    end },
  { "all_gather in rank order", function()
      local gathered = acc:gather(on_device({ { rank, rank * rank } }))
      local ok = gathered:size(1) == size
      for r = 0, size - 1 do
        ok = ok and close(gathered:narrow(1, r + 1, 1), accel.tensor({ { r, r * r } }):float())
      end
      return ok, "shape " .. args.shape(gathered)
    end },
  { "barrier", function()
      acc:wait_for_everyone()
      return true
    end },
  { "gradient reduction", function()
      -- Every rank's gradient after backward is the mean of the ranks' own
      -- gradients, which each rank computes here from everyone's data.
      accel.set_seed(7)
      local model = nn.Linear(4, 2)
      local inputs = {}
      for r = 0, size - 1 do inputs[r] = accel.full({ 3, 4 }, r + 1) * accel.arange(1, 5):float() end
      local expected = accel.zeros(2, 4)
      for r = 0, size - 1 do
        model:zero_grad()
        model(inputs[r]):sum():backward()
        expected = expected + model.weight.grad / size
      end
      model:zero_grad()
      local prepared = acc:prepare(model)
      acc:backward(prepared(inputs[rank]:to(device)):sum())
      return close(prepared.weight.grad, expected), "weight grad sum " .. prepared.weight.grad:sum():item()
    end },
}

acc:print(string.format("  ranks compute on %s and reduce over %s", device,
                        communicates and acc.backend or "nothing (one rank)"))
local failed = 0
for _, check in ipairs(checks) do
  local name, run = check[1], check[2]
  local ok, saw = run()
  local verdicts = acc:gather_object({ ok = ok, saw = saw })
  local bad = {}
  for r, v in ipairs(verdicts) do
    if not v.ok then bad[#bad + 1] = string.format("rank %d saw %s", r - 1, tostring(v.saw)) end
  end
  if #bad == 0 then
    acc:print(string.format("  pass  %s", name))
  else
    failed = failed + 1
    acc:print(string.format("  FAIL  %s (%s)", name, table.concat(bad, "; ")))
  end
end
if failed > 0 then error(string.format("%d of %d collective checks failed", failed, #checks), 0) end
