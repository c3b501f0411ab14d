-- For tests/launch/test_checkpoint_agreement.sh, on 2 ranks:
--
--   accel-run checkpoint_agreement.lua --nproc 2 -- DIR
--
-- A save_state or load_state that fails on one rank only fails on every
-- rank, with one error naming the rank and why, that the recipe catches
-- with pcall and goes on from: the previous checkpoint is untouched and
-- still loads, no half-written folder is left, and the next save, load and
-- collective work. Ends with "checkpoint agreement: N passed, 0 failed".
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local train_steps = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/train_steps.lua")
local nn, optim, data = accel.nn, accel.optim, accel.data
local ck = require("accel.core").formats

local root = assert(arg[1], "give a folder")
local acc = accel.Accelerator{
  project_config = accel.ProjectConfiguration{ project_dir = root .. "/project", automatic_checkpoint_naming = true },
}
local rank = acc.process_index

-- A data set whose size is read from an index file of this rank's: when
-- the file is gone, this rank's loader cannot tell its position, so this
-- rank's share of a save fails and no other's does.
local index = string.format("%s/index_%d", root, rank)
local function write_index()
  local f = assert(io.open(index, "w"))
  f:write("32\n")
  f:close()
end
write_index()
local Indexed = {}
Indexed.__index = Indexed
Indexed.__len = function()
  local f, why = io.open(index)
  if not f then error("cannot read the data set's index: " .. why, 0) end
  local n = f:read("*n")
  f:close()
  return n
end
function Indexed:get(i) return accel.full({ 3 }, i / 32), accel.full({ 1 }, (i % 5) / 5) end

-- A registered object that refuses to be saved or loaded on the ranks listed in `fails`.
local fragile = { fails = { save = {}, load = {} }, state = { n = 0 } }
function fragile:state_dict()
  if self.fails.save[rank] then error("the value store is unreachable", 0) end
  return self.state
end
function fragile:load_state_dict(state)
  if self.fails.load[rank] then error(string.format("rank %d cannot take the state", rank), 0) end
  self.state = state
end

accel.set_seed(3)
local loader = data.DataLoader(setmetatable({}, Indexed), { batch_size = 4 })
local model = nn.Linear(3, 1)
local opt = optim.SGD(model:parameters(), { lr = 0.1 })
model, opt, loader = acc:prepare(model, opt, loader)
acc:register_for_checkpointing(fragile)

local function train(steps) train_steps(acc, model, opt, loader, steps) end

-- Names in `folder` that start with a dot: a temporary folder left behind.
local function leftovers(folder)
  local out = {}
  for _, name in ipairs(ck.list_folder(folder)) do
    if name:sub(1, 1) == "." then out[#out + 1] = name end
  end
  return table.concat(out, ", ")
end

-- `fn` must fail on every rank, naming each rank of `failing` and every
-- word of `words`; afterwards every rank must still stand at the same
-- collective, which a gather of the ranks' numbers shows.
local function fails_together(fn, what, failing, words)
  local err = check.raises(fn, what, unpack(words))
  for _, r in ipairs(failing) do
    check.truthy(err:find("rank " .. r .. ": ", 1, true), what .. ": the error names rank " .. r .. " (" .. err .. ")")
  end
  check.truthy(not err:find("stack traceback", 1, true), what .. ": one message, no traceback")
  check.near(acc:gather(accel.tensor({ rank })), { 0, 1 }, 0, what .. ": the ranks go on together")
  return err
end

local good = root .. "/good"
train(2)
fragile.state = { n = 1 }
check.equal(acc:save_state(good), good, "the first save")
local saved_weight = model.weight:clone()
train(2)
check.truthy(math.abs(model.weight:sum():item() - saved_weight:sum():item()) > 1e-6, "training moved the model")

-- Saves failing on one rank, over the good checkpoint.
fragile.fails.save = { [0] = true }
fails_together(function() acc:save_state(good) end, "a registered object failing on rank 0 (which alone saves it)",
               { 0 }, { "Accelerator:save_state: rank 0: ", "the value store is unreachable" })
fragile.fails.save = {}

acc:wait_for_everyone()
if rank == 1 then os.remove(index) end
local err = fails_together(function() acc:save_state(good) end, "rank 1's data set index gone", { 1 },
                           { "Accelerator:save_state: rank 1: ", "cannot read the data set's index", "index_1" })
check.truthy(not err:find("rank 0", 1, true), "rank 0 did not fail: " .. err)

fragile.fails.save = { [0] = true }
fails_together(function() acc:save_state(good) end, "both ranks failing, each its own way", { 0, 1 },
               { "rank 0: the value store is unreachable", "rank 1: cannot read the data set's index" })
fragile.fails.save = {}
if rank == 1 then write_index() end

-- The main process failing after every rank wrote (renaming onto a file),
-- and before any rank wrote (a temporary folder under a file).
local file = root .. "/a_file"
if acc.is_main_process then
  local f = assert(io.open(file, "w"))
  f:write("not a checkpoint\n")
  f:close()
end
acc:wait_for_everyone()
fails_together(function() acc:save_state(file) end, "the rename into place failing", { 0 },
               { "Accelerator:save_state: rank 0: ", "cannot rename", "a_file" })
fails_together(function() acc:save_state(file .. "/checkpoint") end, "the temporary folder failing", { 0 },
               { "Accelerator:save_state: rank 0: ", "a_file" })
-- The main process removed each temporary folder before the error was raised.
check.equal(leftovers(root), "", "no failed save left a temporary folder")
check.truthy(not ck.is_folder(file), "the file is still a file")

-- An automatic save that fails keeps its number for the next.
check.equal(acc:save_state(), root .. "/project/checkpoints/checkpoint_0", "an automatic save")
fragile.fails.save = { [0] = true }
fails_together(function() acc:save_state() end, "an automatic save failing on rank 0", { 0 },
               { "the value store is unreachable" })
fragile.fails.save = {}
check.equal(leftovers(root .. "/project/checkpoints"), "", "the failed automatic save left no temporary folder")
check.truthy(not ck.is_folder(root .. "/project/checkpoints/checkpoint_1"), "the failed automatic save made no folder")
-- No rank starts the next save, which makes its temporary folder, while another still looks.
acc:wait_for_everyone()
check.equal(acc:save_state(), root .. "/project/checkpoints/checkpoint_1", "the next automatic save takes its number")

-- The good checkpoint is untouched by the failed saves over it.
check.truthy(ck.complete(good), "the good checkpoint is complete")
check.equal(acc:load_state(good), good, "the good checkpoint loads")
check.near(model.weight, saved_weight, 0, "the good checkpoint's weights")
check.equal(fragile.state.n, 1, "the good checkpoint's registered object")

-- A load that one rank's object refuses fails on every rank.
fragile.fails.load = { [1] = true }
fails_together(function() acc:load_state(good) end, "rank 1 refusing a registered state", { 1 },
               { "Accelerator:load_state: rank 1: ", "custom_checkpoint_0.lua' does not fit", "rank 1 cannot take the state" })
fragile.fails.load = {}

-- A load that one rank's file fails: rank 1's random state, truncated.
local copy = root .. "/copy"
check.equal(acc:save_state(copy), copy, "a save after the failures")
acc:wait_for_everyone()
if acc.is_main_process then
  local path = copy .. "/rng_1.safetensors"
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("*a")
  f:close()
  f = assert(io.open(path, "wb"))
  f:write(bytes:sub(1, -2) .. string.char((bytes:byte(-1) + 1) % 256))
  f:close()
end
acc:wait_for_everyone()
fails_together(function() acc:load_state(copy) end, "rank 1's altered random state", { 1 },
               { "Accelerator:load_state: rank 1: ", "rng_1.safetensors", "checksum" })

-- Saves, loads and collectives go on as before.
train(1)
local after = model.weight:clone()
fragile.state = { n = 2 }
check.equal(acc:save_state(copy), copy, "a save over the damaged copy")
train(1)
check.equal(acc:load_state(copy), copy, "the new save loads")
check.near(model.weight, after, 0, "the new save's weights")
check.equal(fragile.state.n, 2, "the new save's registered object")
check.near(acc:reduce(accel.ones(2), "sum"), { 2, 2 }, 0, "a reduce after everything")

print(string.format("rank %d went on to the end", rank))
acc:wait_for_everyone()
check.done("checkpoint agreement")
