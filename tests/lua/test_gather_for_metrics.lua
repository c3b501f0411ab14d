-- nproc: 2 3
-- For every data set size 1..13, with and without drop_last,
-- gather_for_metrics over an epoch returns every sample the loader reads
-- exactly once, although even_batches (the default) repeats samples so that
-- every rank runs the same number of steps: with drop_last, the samples of
-- the complete batches; without, the whole data set.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local data = accel.data
for _, drop_last in ipairs({ false, true }) do
  for n = 1, 13 do
    local acc = accel.Accelerator{}
    local loader = data.DataLoader(data.TensorDataset(accel.arange(1, n + 1)),
                                   { batch_size = 2, drop_last = drop_last })
    loader = acc:prepare(loader)
    local seen = {}
    for ids in loader:iter() do
      -- a table of tensors is gathered alike, element by element
      local pair = acc:gather_for_metrics({ ids, ids * 10 })
      check.near(pair[2], pair[1] * 10, 0, "tables of tensors keep rows aligned")
      for _, id in ipairs(pair[1]:totable()) do
        seen[#seen + 1] = id
      end
    end
    table.sort(seen)
    local what = string.format("n=%d drop_last=%s", n, tostring(drop_last))
    local count = {}
    for _, id in ipairs(seen) do count[id] = (count[id] or 0) + 1 end
    for id, c in pairs(count) do check.equal(c, 1, what .. ": sample " .. id .. " gathered once") end
    if not drop_last then
      check.equal(#seen, n, what .. ": every sample gathered")
    else
      -- Each rank drops at most its last partial batch (one sample at
      -- batch size 2) and the epoch at most W - 1 samples to share evenly.
      local W = acc.num_processes
      check.equal(#seen % 2, 0, what .. ": only complete batches")
      check.truthy(#seen >= n - 2 * W + 1, what .. ": " .. #seen .. " samples is too few")
    end
  end
end
check.done(check.run_name("test_gather_for_metrics"))
