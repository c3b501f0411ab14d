-- nproc: 2 3
-- Port of Accelerate's test_utils/scripts/test_distributed_data_loop.py:
-- even_batches, join_uneven_inputs, samplers and batch samplers, and
-- resuming a loader mid-epoch. The original expects 2 processes; the
-- expected batch sizes here follow accel's sharding rule (rank r reads
-- positions r, r+W, ...) and equal the original's on 2 ranks.
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
local nn, data = accel.nn, accel.data
local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_distributed_data_loop")
local probe = accel.Accelerator{}
local W, rank = probe.num_processes, probe.process_index

local IterableValues = {}
IterableValues.__index = IterableValues
function IterableValues:iter()
  local i = 0
  return function()
    i = i + 1
    if i <= #self.values then return self.values[i] end
  end
end

local function create_dataloader(acc, dataset_size, batch_size, options)
  options = options or {}
  local dataset
  if options.iterable then
    local values = {}
    for i = 0, dataset_size - 1 do values[#values + 1] = i end
    dataset = setmetatable({ values = values }, IterableValues)
  else
    dataset = data.TensorDataset(accel.arange(dataset_size))
  end
  return acc:prepare(data.DataLoader(dataset, { batch_size = batch_size, shuffle = options.shuffle }))
end

-- Rank r's batch sizes, for data set size n and batch b, in accel's rule.
local function batch_sizes_of(acc, n, b)
  local sizes = {}
  for batch in create_dataloader(acc, n, b):iter() do sizes[#sizes + 1] = batch:size(1) end
  return table.concat(sizes, ",")
end

local expected = {
  [2] = { even = { { "1,1", "1,1" }, { "2,2", "2,2" } }, uneven = { { "1,1", "1" }, { "2,2", "2,1" } } },
  [3] = { even = { { "1", "1", "1" }, { "2,1", "2,1", "2,1" } },
          uneven = { { "1", "1", "1" }, { "2,1", "2", "2" } } },
}

sections.run("default_ensures_even_batch_sizes", function()
  local acc = accel.Accelerator{}
  check.equal(batch_sizes_of(acc, 3, 1), expected[W].even[1][rank + 1], "3 samples, batch 1")
  check.equal(batch_sizes_of(acc, 7, 2), expected[W].even[2][rank + 1], "7 samples, batch 2")
end)

sections.run("can_disable_even_batches", function()
  local acc = accel.Accelerator{ even_batches = false }
  check.equal(batch_sizes_of(acc, 3, 1), expected[W].uneven[1][rank + 1], "3 samples, batch 1")
  check.equal(batch_sizes_of(acc, 7, 2), expected[W].uneven[2][rank + 1], "7 samples, batch 2")
end)

-- W + 1 samples: rank 0 has two batches, the others one (3 on 2 ranks, as
-- in the original). Gradients synchronise in acc:backward, not in autograd.
sections.run("can_join_uneven_inputs", function()
  local acc = accel.Accelerator{ even_batches = false }
  local ddp_model = acc:prepare(nn.Linear(1, 1))
  local dl = create_dataloader(acc, W + 1, 1)
  local batch_idxs = {}
  acc:join_uneven_inputs({ ddp_model }, function()
    local i = 0
    for batch in dl:iter() do
      i = i + 1
      ddp_model(batch:float():view(-1, 1)):sum():backward()  -- a plain backward, as the original
      batch_idxs[#batch_idxs + 1] = i
    end
  end)
  acc:wait_for_everyone()
  check.equal(table.concat(batch_idxs, ","), rank == 0 and "1,2" or "1", "batches each rank ran")
end)

sections.run("join_can_override_even_batches", function()
  local acc = accel.Accelerator{ even_batches = true }
  local ddp_model = acc:prepare(nn.Linear(1, 1))
  local train_dl, valid_dl = create_dataloader(acc, 3, 1), create_dataloader(acc, 3, 1)
  local inside = {}
  acc:join_uneven_inputs({ ddp_model }, function()
    inside = { train_dl.even_batches, valid_dl.even_batches }
  end, { even_batches = false })
  check.equal(inside[1], false, "train loader overridden inside join")
  check.equal(inside[2], false, "valid loader overridden inside join")
  check.equal(train_dl.even_batches, true, "train loader restored")
  check.equal(valid_dl.even_batches, true, "valid loader restored")
end)

sections.run("join_can_override_for_mixed_type_dataloaders", function()
  local acc = accel.Accelerator{ even_batches = true }
  local ddp_model = acc:prepare(nn.Linear(1, 1))
  create_dataloader(acc, 3, 1, { iterable = true })
  local batch_dl = create_dataloader(acc, 3, 1)
  local inside
  acc:join_uneven_inputs({ ddp_model }, function() inside = batch_dl.even_batches end, { even_batches = false })
  check.equal(inside, false, "map-style loader overridden")
  check.equal(batch_dl.even_batches, true, "map-style loader restored")
end)

-- Accelerate warns through its logger; accel's logger writes to stderr.
sections.run("join_warns_for_iterable_when_overriding_even_batches", function()
  local acc = accel.Accelerator{}
  local ddp_model = acc:prepare(nn.Linear(1, 1))
  create_dataloader(acc, 3, 1, { iterable = true })
  local written, stderr = {}, io.stderr
  io.stderr = { write = function(_, ...) for _, s in ipairs({ ... }) do written[#written + 1] = s end end }
  local ok, err = pcall(acc.join_uneven_inputs, acc, { ddp_model }, function() end, { even_batches = false })
  io.stderr = stderr
  if not ok then error(err, 0) end
  if acc.is_main_process then
    check.truthy(table.concat(written):find("map-style", 1, true), "a warning naming map-style data sets")
  end
end)

-- 22 samples of {index, label, random_augmentation}; Lua data sets are
-- read on the Lua thread, so num_workers stays 0.
local DummyDataset = {}
DummyDataset.__index = DummyDataset
DummyDataset.__len = function() return 22 end
function DummyDataset:get(i) return { index = i, label = i % 2, random_augmentation = accel.rand(1):item() } end
local dataset = setmetatable({}, DummyDataset)

local function test_data_loader(loader)
  local acc = accel.Accelerator{}
  loader = acc:prepare(loader)
  local seen = {}
  for batch in loader:iter() do
    local gathered = acc:gather_for_metrics({ batch.index, batch.label })
    for _, i in ipairs(gathered[1]:totable()) do seen[i] = (seen[i] or 0) + 1 end
  end
  for i = 1, 22 do check.equal(seen[i], 1, "sample " .. i .. " gathered once") end
end

sections.run("data_loader_shuffle_false", function()
  test_data_loader(data.DataLoader(dataset, { batch_size = 4, shuffle = false }))
end)
sections.run("data_loader_shuffle_true", function()
  test_data_loader(data.DataLoader(dataset, { batch_size = 4, shuffle = true }))
end)
sections.run("data_loader_batch_sampler", function()
  local sampler = data.BatchSampler(data.RandomSampler(dataset), { batch_size = 4, drop_last = false })
  test_data_loader(data.DataLoader(dataset, { batch_sampler = sampler }))
end)
sections.run("data_loader_sampler_is_a_batch_sampler", function()
  local sampler = data.BatchSampler(data.RandomSampler(dataset), { batch_size = 4, drop_last = false })
  test_data_loader(data.DataLoader(dataset, { sampler = sampler, batch_size = false }))
end)

-- Resuming mid-epoch: the batches after the third equal those read again
-- after load_state_dict (accel's loaders are always stateful).
local function resume(iterable, restore)
  local acc = accel.Accelerator{}
  local dl = create_dataloader(acc, 32 * W, 4, { iterable = iterable, shuffle = not iterable })
  local saved, untrained, step = nil, {}, 0
  for batch in dl:iter() do
    if step == 2 then saved = restore.save(acc, dl) end
    if step > 2 then untrained[#untrained + 1] = batch end
    step = step + 1
  end
  local not_skipped = acc:gather(untrained)
  restore.load(acc, dl, saved)
  local resumed = {}
  for batch in dl:iter() do resumed[#resumed + 1] = batch end
  resumed = acc:gather(resumed)
  check.equal(#resumed, #not_skipped, "batches after resuming")
  for i = 1, #resumed do check.near(resumed[i], not_skipped[i], 0, "batch " .. i .. " after resuming") end
end
local by_state_dict = {
  save = function(_, dl) return dl:state_dict() end,
  load = function(_, dl, saved) dl:load_state_dict(saved) end,
}
local by_save_state = {
  save = function(acc, _)
    local folder = acc:gather_object(os.tmpname())[1] .. ".checkpoint"
    acc:save_state(folder)
    return folder
  end,
  load = function(acc, _, folder)
    acc:load_state(folder)
    acc:wait_for_everyone()
    if acc.is_main_process then os.execute("rm -rf '" .. folder .. "'") end
  end,
}
sections.run("stateful_dataloader", function() resume(false, by_state_dict) end)
sections.run("stateful_dataloader_iterable", function() resume(true, by_state_dict) end)
sections.run("stateful_dataloader_save_state", function() resume(false, by_save_state) end)
sections.run("stateful_dataloader_save_state_iterable", function() resume(true, by_save_state) end)

sections.finish()
