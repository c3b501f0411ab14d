-- nproc: 2
-- join_uneven_inputs under sharding: uneven batches are refused before the
-- loop runs (a rank that stopped stepping would leave its shard stale and
-- the others waiting in the step's gathers); even batches train as usual.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local nn, optim = accel.nn, accel.optim

for _, stage in ipairs({ 1, 3 }) do
  local acc = accel.Accelerator{ zero_stage = stage }
  accel.manual_seed(0)
  local model = nn.Linear(4, 2)
  local opt = optim.SGD(model:parameters(), { lr = 0.1 })
  model, opt = acc:prepare(model, opt)
  local ran = false
  check.raises(function() acc:join_uneven_inputs({ model }, function() ran = true end, { even_batches = false }) end,
               "stage " .. stage .. ", uneven", "cannot be joined under sharding", "DEEPSPEED, stage " .. stage,
               "even_batches = true")
  check.equal(ran, false, "stage " .. stage .. ": the loop did not run")
  local steps = 0
  acc:join_uneven_inputs({ model }, function()
    for _ = 1, 2 do
      acc:backward(model(accel.ones(3, 4)):sum())
      opt:step()
      opt:zero_grad()
      steps = steps + 1
    end
  end)
  check.equal(steps, 2, "stage " .. stage .. ": even batches run the loop")
end

local uneven = accel.Accelerator{ fsdp_plugin = accel.FullyShardedDataParallelPlugin{}, even_batches = false }
local linear = nn.Linear(4, 2)
local model = uneven:prepare(linear, optim.SGD(linear:parameters(), { lr = 0.1 }))
check.raises(function() uneven:join_uneven_inputs({ model }, function() end) end, "the Accelerator's even_batches",
             "cannot be joined under sharding", "FSDP, stage 3")
check.done("test_join_sharded")
