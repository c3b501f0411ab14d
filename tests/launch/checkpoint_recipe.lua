-- A small training run with every source of state a resume must restore:
-- shuffled batches, dropout (the engine's generator), input noise from
-- math.random, AdamW and a cosine schedule with warmup. It saves a
-- checkpoint every 10 optimizer steps under automatic naming (keeping 3).
-- Used by tests/launch/test_checkpoint_resume.sh and test_checkpoint_crash.sh.
--
--   accel-run checkpoint_recipe.lua --nproc 2 -- PROJECT_DIR [FAIL_AT [resume]]
--
-- FAIL_AT: the main process raises an error right after printing that step
-- (0: never); only it, so that no failing peer can stop it before it
-- prints. "resume":
-- acc:load_state() before training. The main process prints, per step,
-- "step <k> losses <rank 0 loss> <rank 1 loss> lr <lr>".
local nn, optim, data = accel.nn, accel.optim, accel.data

local project_dir, fail_at, resume = arg[1], tonumber(arg[2] or "0"), arg[3] == "resume"
local total_steps = 40

local acc = accel.Accelerator{
  project_config = accel.ProjectConfiguration{
    project_dir = project_dir, automatic_checkpoint_naming = true, total_limit = 3,
  },
}
accel.set_seed(11)

local n = 200
local x = accel.randn(n, 8)
local y = accel.randint(1, 5, { n })
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.3), nn.Linear(32, 4))
local opt = optim.AdamW(model:parameters(), { lr = 0.02, weight_decay = 0.01 })
local sched = optim.lr_scheduler.cosine(opt, { total = total_steps, warmup = 5 })
model, opt, loader, sched = acc:prepare(model, opt, loader, sched)

if resume then acc:print("resumed from " .. acc:load_state()) end

while opt.updates < total_steps do
  for xb, yb in loader:iter() do
    local noise = math.random() * 0.5
    local loss = nn.functional.cross_entropy(model(xb + noise), yb)
    acc:backward(loss)
    opt:step(); sched:step(); opt:zero_grad()
    local step = opt.updates
    local losses = acc:gather(loss:detach()):totable()
    for i, v in ipairs(losses) do losses[i] = string.format("%.9g", v) end
    acc:print(string.format("step %d losses %s lr %.9g", step, table.concat(losses, " "), sched:get_last_lr()[1]))
    if step % 10 == 0 then acc:save_state() end
    if step == fail_at and acc.is_main_process then error("injected failure after step " .. step) end
    if step == total_steps then break end
  end
end
acc:end_training()
