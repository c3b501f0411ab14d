-- The workload of bench/serve/first_step.sh: load a pretrained folder and
-- take one AdamW step on it; rank 0 prints how long it took from FROM (a
-- CLOCK_MONOTONIC time, as accel.time() and Python's time.monotonic give,
-- taken just before `accel-run submit` started) to the start of the first
-- step, to its end, and how many tensors the warm worker handed it from
-- what a previous run loaded.
--   accel-run first_step.lua -- FOLDER FROM
local folder, from = arg[1], tonumber(arg[2])
local model = accel.models.from_pretrained(folder)
model:train()
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-4 })
local ids = accel.LongTensor({ { 1, 2, 3, 4, 5, 6, 7, 8 } })
local started = accel.time()
local out = model({ input_ids = ids, labels = ids })
out.loss:backward()
opt:step()
local ended = accel.time()
local kept = require("accel.core").formats.kept_weights()
if (os.getenv("RANK") or "0") == "0" then
  print(string.format("FIRST_STEP start %.3f end %.3f found %d", started - from, ended - from, kept.found))
end
