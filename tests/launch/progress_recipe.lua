-- A loop under accel.progress on every rank, slow enough to be watched:
-- `-- N DELAY INTERVAL` runs N items, DELAY seconds each, plain lines every
-- INTERVAL seconds. test_progress.sh reads what the main process drew.
local n, delay, interval = tonumber(arg[1]), arg[2], tonumber(arg[3])
local bar = accel.progress(n, { desc = "train", interval = interval })
local seen = 0
for i in bar do
  seen = seen + i
  os.execute("sleep " .. delay)
  bar:set_postfix{ loss = 1 / i, phase = "warm" }
end
assert(seen == n * (n + 1) / 2, "every item once")
-- A loader's length is the bar's total; other ranks draw nothing.
local data = accel.data
local loader = data.DataLoader(data.TensorDataset(accel.zeros(12, 2)), { batch_size = 4 })
local batches = 0
for x in accel.progress(loader, { desc = "eval" }) do batches = batches + 1 end
assert(batches == 3)
for _ in accel.progress({ "a", "b" }, { disable = true }) do end
accel.PartialState():print("progress recipe done")
