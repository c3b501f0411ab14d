-- Asynchronous checkpoints (tests/launch/test_async_save.sh).
--
--   accel-run async_save_recipe.lua -- ROOT same|crash|resume
--
-- same: after 5 steps, a synchronous save to ROOT/sync and an asynchronous
-- one to ROOT/async of the same state, and one to ROOT/paced whose writer
-- may use a twentieth of a core, then 3 more steps (changing the weights in
-- place while the files are written), then acc:wait_for_checkpoint(), then
-- two saves with a writer_share out of range or without async. crash: a synchronous save to ROOT/good, 2
-- steps, an asynchronous save to ROOT/bad, then training goes on (until the
-- fault point checkpoint-async-write kills the rank mid-write). resume:
-- acc:load_state(ROOT/good).
local nn, optim = accel.nn, accel.optim

local root, mode = arg[1], arg[2]
local acc = accel.Accelerator{}
accel.set_seed(2)
local width = 64
local model = nn.Sequential(nn.Linear(16, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 1))
local opt = optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt = acc:prepare(model, opt)

local function train(steps)
  for _ = 1, steps do
    local x = accel.randn(8, 16)
    local loss = model(x):pow(2):mean()
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
  end
end

if mode == "same" then
  train(5)
  acc:save_state(root .. "/sync")
  acc:save_state(root .. "/async", { async = true })
  -- The same state again, written at a twentieth of a core.
  acc:save_state(root .. "/paced", { async = true, writer_share = 0.05 })
  train(3)
  acc:print("waited for " .. acc:wait_for_checkpoint())
  for _, options in ipairs({ { async = true, writer_share = 0 }, { writer_share = 0.5 } }) do
    local ok, err = pcall(acc.save_state, acc, root .. "/refused", options)
    acc:print(ok and "accepted" or ("refused: " .. err))
  end
elseif mode == "crash" then
  train(1)
  acc:save_state(root .. "/good")
  train(2)
  acc:save_state(root .. "/bad", { async = true })
  acc:print("staged")
  train(1000)
else
  acc:load_state(root .. "/good")
  acc:print("loaded at update " .. opt.updates)
end
