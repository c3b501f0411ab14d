-- nproc: 2 3
-- Port of Accelerate's test_utils/scripts/test_script.py: the process
-- helpers, split_between_processes, RNG synchronisation, prepared loaders
-- (also with split_batches, dispatch_batches and a custom batch sampler),
-- seeded shuffles, training against a single-process baseline, and the
-- trigger. Run at 2 and 3 ranks (tests/CMakeLists.txt); where the original expects a
-- given number of processes, the expectation is generalised to any.
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
local F, optim, data = accel.nn.functional, accel.optim, accel.data
local training = dofile(dir .. "helpers/accelerate_training.lua")
local sections = dofile(dir .. "helpers/accelerate_sections.lua")(check, "test_accelerate_script")
local acc = accel.Accelerator{}
local W, rank = acc.num_processes, acc.process_index

local function range(first, last)
  local out = {}
  for i = first, last do out[#out + 1] = i end
  return out
end
local function list_string(list) return table.concat(list, ",") end
-- gather_object gives one list per rank; Accelerate's flattens them.
local function gathered_list(values)
  local out = {}
  for _, part in ipairs(acc:gather_object(values)) do
    for _, v in ipairs(part) do out[#out + 1] = v end
  end
  return out
end
local function first(list, n) return { unpack(list, 1, n) } end
-- LuaJIT ignores __len on tables: a data set's length is asked of it.
local function length_of(dataset) return getmetatable(dataset).__len(dataset) end
-- Runs the rank-local part of a check on every rank, then raises on all
-- of them if one failed, so that no rank enters the next collective alone.
local function in_step(fn)
  local ok, result = pcall(fn)
  for r, message in ipairs(acc:gather_object(ok and "" or tostring(result))) do
    if message ~= "" then error(string.format("rank %d: %s", r - 1, message), 0) end
  end
  return result
end
-- Accelerate's contiguous shares: the first n % W ranks take one more.
local function share_of(n, r)
  local base, extra = math.floor(n / W), n % W
  return r * base + math.min(r, extra), base + (r < extra and 1 or 0)
end

sections.run("init_state", function()
  for _ = 1, 2 do  -- made twice in a row, as in the original
    local state = accel.PartialState()
    check.equal(state.process_index, rank, "PartialState().process_index")
    check.equal(state.local_process_index, acc.local_process_index, "PartialState().local_process_index")
    check.equal(state.num_processes, W, "PartialState().num_processes")
    check.equal(state.is_main_process, rank == 0, "PartialState().is_main_process")
    check.equal(state.is_last_process, rank == W - 1, "PartialState().is_last_process")
  end
end)

-- process_execution_check, first half: the main process writes first.
sections.run("main_process_first", function()
  local mine = os.tmpname()
  local path = acc:gather_object(mine)[1]
  if rank ~= 0 then os.remove(mine) end
  acc:main_process_first(function()
    local line = "Now on another process\n"
    if acc.is_main_process then
      os.execute("sleep 0.1")  -- the main process takes longest
      line = "Currently in the main process\n"
    end
    local f = assert(io.open(path, "a+"))
    f:write(line)
    f:close()
  end)
  acc:wait_for_everyone()
  local text
  if acc.is_main_process then
    local f = assert(io.open(path))
    text = f:read("*a")
    f:close()
    os.remove(path)
  end
  acc:wait_for_everyone()
  if not acc.is_main_process then return end
  local other = "Now on another process\n"
  check.equal(text:sub(1, 30), "Currently in the main process\n", "main process was first")
  if W > 1 then check.equal(text:sub(-#other), other, "main process was not last") end
  local _, others = text:gsub(other, "")
  check.equal(others, W - 1, "lines written by the other processes")
end)

-- process_execution_check, second half. Lua has no decorators: each
-- helper runs fn at once on the chosen process and returns its result.
local function check_runs_on(helper, chosen, ...)
  local ran = false
  local result = acc[helper](acc, function() ran = true return "printed" end, ...)
  local what = string.format("%s(%s) on rank %d", helper, table.concat({ ... }, ","), rank)
  check.equal(ran, chosen, what .. " ran")
  check.equal(result, chosen and "printed" or nil, what .. " returned")
end
sections.run("on_process_helpers", function()
  check_runs_on("on_main_process", acc.is_main_process)
  check_runs_on("on_local_main_process", acc.is_local_main_process)
  check_runs_on("on_last_process", rank == W - 1)
  for i = 0, W - 1 do check_runs_on("on_process", rank == i, i) end
  -- One machine: every rank is local.
  for i = 0, W - 1 do check_runs_on("on_local_process", acc.local_process_index == i, i) end
  check.equal(acc.is_last_process, rank == W - 1, "is_last_process")
end)

sections.run("split_between_processes_list", function()
  in_step(function()
    check.equal(#acc:split_between_processes(range(0, 2 * W - 1)), 2, "items per process of 2W")
  end)
  for _, n in ipairs({ 2 * W - 1, 2 * W }) do
    local data_list = range(0, n - 1)
    local results = in_step(function()
      local results = acc:split_between_processes(data_list, { apply_padding = true })
      check.equal(#results, math.ceil(n / W), string.format("padded items per process of %d", n))
      return results
    end)
    check.equal(list_string(first(gathered_list(results), n)), list_string(data_list),
                string.format("gathered shares of %d", n))
  end
end)

-- The original runs on 1, 2 or 4 processes only; the shares of 8 items
-- are computed here for any number.
sections.run("split_between_processes_nested_dict", function()
  local a = range(1, 8)
  local b = { "a", "b", "c", "d", "e", "f", "g", "h" }
  local c = accel.tensor(range(1, 8), { dtype = accel.int64 })
  local results = acc:split_between_processes({ a = a, b = b, c = c })
  local start, count = share_of(8, rank)
  check.equal(list_string(results.a), list_string({ unpack(a, start + 1, start + count) }), "share of a")
  check.equal(list_string(results.b), list_string({ unpack(b, start + 1, start + count) }), "share of b")
  check.equal(list_string(training.flat(results.c)), list_string(range(start + 1, start + count)), "share of c")
  check.equal(list_string(a), list_string(range(1, 8)), "a is not modified")
end)

sections.run("split_between_processes_tensor", function()
  -- Two rows: one each for ranks 0 and 1, none for the others (Accelerate
  -- gives a rank without items the last one; accel an empty share).
  in_step(function()
    local two = accel.tensor({ { 0, 1, 2, 3 }, { 4, 5, 6, 7 } }, { dtype = accel.int64 })
    local part = acc:split_between_processes(two)
    local expected = ({ [0] = { 0, 1, 2, 3 }, [1] = { 4, 5, 6, 7 } })[rank] or {}
    check.equal(part:size(1), rank < 2 and 1 or 0, "rows of 2 on rank " .. rank)
    check.equal(list_string(training.flat(part)), list_string(expected), "share of 2 rows")
  end)
  for _, n in ipairs({ 2 * W, 2 * W - 1 }) do
    local results = in_step(function()
      local results = acc:split_between_processes(accel.arange(n):view(n, 1), { apply_padding = true })
      check.equal(results:size(1), math.ceil(n / W), string.format("padded rows per process of %d", n))
      return results
    end)
    check.equal(list_string(first(gathered_list(training.flat(results)), n)), list_string(range(0, n - 1)),
                string.format("gathered rows of %d", n))
  end
end)

sections.run("split_between_processes_evenly", function()
  local results = acc:split_between_processes(range(0, 16))
  local start, count = share_of(17, rank)
  check.equal(#results, count, "items of 17 on rank " .. rank)
  check.equal(results[1], start, "first item of the share")
end)

-- A Lua data set of samples {k = 0}, {k = 1}, ... (the original's
-- datasets.Dataset.from_list); a share is a data set too.
local KDataset = {}
KDataset.__index = KDataset
KDataset.__len = function(self) return self.length end
function KDataset:get(i) return { k = i - 1 } end
local function k_dataset(length) return setmetatable({ length = length }, KDataset) end
local function ks(dataset)
  local out = {}
  for i = 1, length_of(dataset) do out[i] = dataset:get(i).k end
  return out
end

sections.run("split_between_processes_dataset", function()
  in_step(function()
    check.equal(length_of(acc:split_between_processes(k_dataset(2 * W), { apply_padding = false })), 2,
                "samples per process of 2W")
    check.equal(length_of(acc:split_between_processes(k_dataset(2 * W - 1), { apply_padding = false })),
                rank == W - 1 and 1 or 2, "samples per process of 2W - 1")
  end)
  for _, n in ipairs({ 2 * W - 1, 2 * W }) do
    local shared = in_step(function()
      local results = acc:split_between_processes(k_dataset(n), { apply_padding = true })
      check.equal(length_of(results), 2, string.format("padded samples per process of %d", n))
      return ks(results)
    end)
    check.equal(list_string(first(gathered_list(shared), n)), list_string(range(0, n - 1)),
                string.format("gathered samples of %d", n))
  end
end)

-- Not in the original: fewer items than ranks. The last rank's share is
-- empty, and every rank returns (none waits for the others).
sections.run("split_between_processes_empty_share", function()
  local n = W - 1
  local want = rank < n and 1 or 0
  local padded = in_step(function()
    check.equal(#acc:split_between_processes(range(1, n)), want, "list items on rank " .. rank)
    check.equal(acc:split_between_processes(accel.arange(n)):size(1), want, "tensor rows on rank " .. rank)
    check.equal(length_of(acc:split_between_processes(k_dataset(n))), want, "data set samples on rank " .. rank)
    local padded = acc:split_between_processes(range(1, n), { apply_padding = true })
    check.equal(#padded, 1, "padded list items on rank " .. rank)
    return padded
  end)
  check.equal(list_string(first(gathered_list(padded), n)), list_string(range(1, n)), "gathered padded shares")
end)

-- rng_sync_check. Every rank is seeded differently first, so that
-- synchronisation has something to do.
sections.run("rng_sync_torch", function()
  accel.manual_seed(100 + rank)
  accel.synchronize_rng_states({ "torch" })
  check.truthy(training.are_the_same_tensors(acc, accel.get_rng_state()), "generator states synchronised")
  check.truthy(training.are_the_same_tensors(acc, accel.rand(4)), "draws agree after synchronising")
end)
-- Accelerate's "generator" is a torch.Generator given to a loader; accel's
-- loaders shuffle from a seed, and math.random is the other generator.
sections.run("rng_sync_math_random", function()
  math.randomseed(100 + rank)
  acc:synchronize_rng_states()
  local draws = acc:gather_object({ math.random(), math.random() })
  for r = 2, W do check.equal(list_string(draws[r]), list_string(draws[1]), "math.random on rank " .. (r - 1)) end
end)

-- dl_preparation_check and central_dl_preparation_check. accel shards by
-- interleaving, so each gathered step holds the right samples in another
-- order: without shuffle, each step sorted follows on from the last; with
-- shuffle, all of them sorted are every sample once.
local function prepared_contents(options, shuffle)
  local length = 32 * W
  local batch_size = options.split_batches and training.divisible_batch_size(8, W) or 8
  local loader = accel.Accelerator(options):prepare(
    data.DataLoader(data.TensorDataset(accel.arange(length)), { batch_size = batch_size, shuffle = shuffle }))
  local out = {}
  for batch in loader:iter() do
    local step = training.flat(acc:gather(batch))
    table.sort(step)
    for _, v in ipairs(step) do out[#out + 1] = v end
  end
  if shuffle then table.sort(out) end
  check.equal(list_string(out), list_string(range(0, length - 1)), "gathered samples")
end
for _, central in ipairs({ false, true }) do
  for _, shuffle in ipairs({ false, true }) do
    for _, split_batches in ipairs({ false, true }) do
      sections.run(string.format("%sdl_preparation:shuffle=%s:split_batches=%s", central and "central_" or "",
                                 tostring(shuffle), tostring(split_batches)), function()
        -- dispatch_batches = false is the default
        prepared_contents({ split_batches = split_batches, dispatch_batches = central or nil }, shuffle)
      end)
    end
  end
end

-- custom_sampler_check: a batch sampler of the user's (a table with
-- iter(epoch) and a length) stays the loader's after prepare, sharded.
local CustomBatchSampler = {}
CustomBatchSampler.__index = CustomBatchSampler
CustomBatchSampler.__len = function(self) return math.ceil(self.dataset_length / self.batch_size) end
-- Every rank must draw the same order: a small generator seeded by the epoch.
local function permutation(n, seed)
  local order, state = range(1, n), seed + 1
  for i = n, 2, -1 do
    state = (state * 69069 + 1) % 4294967296
    local j = state % i + 1
    order[i], order[j] = order[j], order[i]
  end
  return order
end
-- np.array_split(index, len(self)): parts differing by at most one.
function CustomBatchSampler:iter(epoch)
  local index = self.shuffle and permutation(self.dataset_length, epoch) or range(1, self.dataset_length)
  local num_batches = length_of(self)
  local batches, at = {}, 0
  for b = 0, num_batches - 1 do
    local size = math.floor(#index / num_batches) + (b < #index % num_batches and 1 or 0)
    batches[#batches + 1] = { unpack(index, at + 1, at + size) }
    at = at + size
  end
  return batches
end
sections.run("custom_sampler", function()
  local CustomDataset = { __len = function(self) return #self.data end }
  CustomDataset.__index = { get = function(self, i) return self.data[i] end }
  local dataset = setmetatable({ data = range(0, 32 * W - 1) }, CustomDataset)
  local sampler = setmetatable({ dataset_length = length_of(dataset), batch_size = 8, shuffle = true },
                               CustomBatchSampler)
  local mine = in_step(function()
    local dl = acc:prepare(data.DataLoader(dataset, { batch_sampler = sampler }))
    check.truthy(rawequal(dl.batch_sampler, sampler), "custom sampler kept after prepare")
    local mine = {}
    for batch in dl:iter() do
      for _, v in ipairs(training.flat(batch)) do mine[#mine + 1] = v end
    end
    return mine
  end)
  local all = gathered_list(mine)
  table.sort(all)
  check.equal(list_string(all), list_string(range(0, 32 * W - 1)), "every sample once over the ranks")
end)

local function three_epochs_of_x(loader)
  local items = {}
  for _ = 1, 3 do
    for batch in loader:iter() do
      for _, v in ipairs(training.flat(batch.x)) do items[#items + 1] = v end
    end
  end
  return items
end
-- check_seedable_sampler: the same seed and epoch give the same items.
sections.run("seedable_sampler", function()
  accel.set_seed(42)
  local train_set = training.RegressionDataset{ length = 10, seed = 42 }
  local train_dl = accel.Accelerator{}:prepare(data.DataLoader(train_set, { batch_size = 2, shuffle = true }))
  local original = three_epochs_of_x(train_dl)
  accel.set_seed(42)
  train_dl:set_epoch(0)
  check.truthy(training.allclose(three_epochs_of_x(train_dl), original), "same items with the same seed and epoch")
end)
-- check_seedable_sampler_with_data_seed: a loader's seed is data_seed.
sections.run("seedable_sampler_with_data_seed", function()
  accel.set_seed(42)
  local train_set = training.RegressionDataset{ length = 10, seed = 42 }
  local function items(seed)
    return three_epochs_of_x(accel.Accelerator{}:prepare(
      data.DataLoader(train_set, { batch_size = 2, shuffle = true, seed = seed })))
  end
  check.truthy(not training.allclose(items(42), items(43)), "different items with another data seed")
end)

-- training_check: 3 epochs on W ranks with batch b give the model that one
-- process gives with batch b*W (or, with split_batches, the same loader).
local batch_size = 8
local length = batch_size * 4 * W
local function train(loader, model, optimizer, backward)
  accel.set_seed(42)  -- the loaders' shuffling seed, as generator.manual_seed(42)
  for _ = 1, 3 do
    for batch in loader:iter() do
      model:zero_grad()
      backward(F.mse_loss(model(batch.x), batch.y))
      optimizer:step()
    end
  end
end
local function mock_training()
  accel.set_seed(42)
  local train_set = training.RegressionDataset{ length = length, seed = 42 }
  local model = training.RegressionModel()
  train(data.DataLoader(train_set, { batch_size = batch_size * W, shuffle = true }), model,
        optim.SGD(model:parameters(), { lr = 0.1 }), function(loss) loss:backward() end)
  return train_set, model
end
local train_set, old_model = mock_training()

local function training_check(options, loader_batch_size)
  check.truthy(training.are_the_same_tensors(acc, old_model.a), "same baseline a on every process")
  check.truthy(training.are_the_same_tensors(acc, old_model.b), "same baseline b on every process")
  local accelerator = accel.Accelerator(options)
  local model = training.RegressionModel()
  local train_dl, prepared, optimizer = accelerator:prepare(
    data.DataLoader(train_set, { batch_size = loader_batch_size, shuffle = true }), model,
    optim.SGD(model:parameters(), { lr = 0.1 }))
  train(train_dl, prepared, optimizer, function(loss) accelerator:backward(loss) end)
  model = accelerator:unwrap_model(prepared)
  for _, name in ipairs({ "a", "b" }) do
    check.truthy(training.allclose(model[name], old_model[name], 1e-6, 1e-6),
                 string.format("the same %s on one process and distributed: %.9g vs %.9g", name,
                               model[name]:item(), old_model[name]:item()))
  end
end
sections.run("training", function() training_check({}, batch_size) end)
sections.run("training:split_batches", function() training_check({ split_batches = true }, batch_size * W) end)
-- The model's elementwise operations stay float32 under bf16 autocast.
sections.run("training:bf16", function() training_check({ mixed_precision = "bf16" }, batch_size) end)
-- On the CPU, fp16 is the loss scaler alone: scaling by a power of two
-- and unscaling must not change the result.
sections.run("training:fp16", function() training_check({ mixed_precision = "fp16" }, batch_size) end)

sections.run("trigger", function()
  local accelerator = accel.Accelerator{}
  check.equal(accelerator:check_trigger(), false, "no trigger at first")
  if accelerator.is_main_process then accelerator:set_trigger() end
  check.equal(accelerator:check_trigger(), true, "the main process's trigger seen on every process")
  check.equal(accelerator:check_trigger(), false, "the trigger is reset after the check")
end)

sections.finish()
