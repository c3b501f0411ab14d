-- Logs known scalars and a config with log_with = "all" on every rank,
-- for test_trackers.sh to read back with TensorBoard's own reader and
-- Python's json. `-- PROJECT NAME` names the folders; `-- PROJECT NAME fail`
-- ends on an error after logging, to show the files are flushed anyway.
local project, name, mode = arg[1], arg[2], arg[3]
local acc = accel.Accelerator{ log_with = "all", project_dir = project }
acc:init_trackers(name, {
  lr = 0.001, batch_size = 64, optimizer = "AdamW", amp = false,
  model = { depth = 3, width = 256 }, title = "run-\206\177",
})
for step = 0, 9 do
  -- Every rank calls log; only the main process writes.
  acc:log({
    loss = 1 / (step + 1),
    accuracy = step * 0.1,
    big = 1e10 + step,
    grad = { norm = step / 3 },
    tensor = accel.tensor({ step * 2 }),
  }, step * 10)
end
acc:log({ late = 7 })  -- no step: the number of earlier log calls, 10
local ok, message = pcall(function() acc:log({ loss = "high" }, 1) end)
assert(not ok and message:find("'loss' is a string", 1, true), message)
ok, message = pcall(function() acc:get_tracker("wandb") end)
assert(not ok and message:find("no tracker 'wandb'", 1, true), message)
if acc.is_main_process then
  local tb = acc:get_tracker("tensorboard")
  assert(tb:path():find(project .. "/" .. name .. "/events.out.tfevents.", 1, true), tb:path())
  assert(acc:get_tracker("jsonl"):path() == project .. "/" .. name .. "/metrics.jsonl")
end
if mode == "fail" then
  -- The main process alone fails, so no launcher stop can come first.
  if acc.is_main_process then error("the recipe fails after logging") end
  return
end
acc:end_training()
print("trackers recipe done")
