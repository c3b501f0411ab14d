-- nproc: 2
-- A damaged checkpoint is refused, on every rank, with a message naming
-- the file (and the rank that found it), before anything is changed;
-- load_state() without a folder skips incomplete checkpoints and says
-- clearly when there is none; a save over an existing folder replaces it.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local train_steps = dofile(here .. "helpers/train_steps.lua")
local hostile = dofile(here .. "helpers/hostile_values.lua")
local serialize = require("accel.serialize")
local nn, optim, data = accel.nn, accel.optim, accel.data
local ck = require("accel.core").formats

local root = "/tmp/accel_test_checkpoint_corruption_" .. (os.getenv("MASTER_PORT") or "1")
local acc = accel.Accelerator{
  project_config = accel.ProjectConfiguration{ project_dir = root .. "/project", automatic_checkpoint_naming = true },
}
accel.set_seed(1)
local loader = data.DataLoader(data.TensorDataset(accel.randn(40, 3), accel.randn(40, 1)), { batch_size = 4 })
local model = nn.Linear(3, 1)
local opt = optim.Adam(model:parameters(), { lr = 0.1 })
model, opt, loader = acc:prepare(model, opt, loader)

local function train(steps) train_steps(acc, model, opt, loader, steps) end

local read = dofile(here .. "helpers/read_file.lua")

local function write(path, bytes)
  local f = assert(io.open(path, "wb"))
  f:write(bytes)
  f:close()
end

-- Rank 0 damages `name` with `damage(bytes)`; every rank then tries to load.
local function refused(name, damage, what, ...)
  local path = root .. "/explicit/" .. name
  local good = read(path)
  acc:wait_for_everyone()
  if acc.is_main_process then write(path, damage(good)) end
  acc:wait_for_everyone()
  local weight = model.weight:clone()
  check.raises(function() acc:load_state(root .. "/explicit") end, what, ...)
  check.near(model.weight, weight, 0, what .. ": nothing was loaded")
  acc:wait_for_everyone()
  if acc.is_main_process then write(path, good) end
  acc:wait_for_everyone()
end

train(2)
acc:save_state(root .. "/explicit")
local saved_weight = model.weight:clone()
train(2)
check.truthy(math.abs(model.weight:sum():item() - saved_weight:sum():item()) > 1e-6, "training moved the model")

local function truncate(bytes) return bytes:sub(1, #bytes - 3) end
local function flip_last(bytes) return bytes:sub(1, -2) .. string.char((bytes:byte(-1) + 1) % 256) end

refused("model.safetensors", truncate, "truncated weights", "model.safetensors", "ranks 0, 1: ", "truncated")
refused("model.safetensors", flip_last, "altered weights", "model.safetensors", "checksum")
refused("optimizer.safetensors", flip_last, "altered optimizer state", "optimizer.safetensors", "checksum")
refused("rng_1.safetensors", flip_last, "an altered file of rank 1", "rank 1: ", "rng_1.safetensors", "checksum")
refused("dataloader_rank_0.lua", flip_last, "an altered loader position", "dataloader_rank_0.lua")
refused("manifest.json", function() return "{\"format\": " end, "a broken manifest", "manifest.json",
        "not valid JSON")
refused("manifest.json", function(bytes) return bytes:gsub("\"step\"", "\"stop\"", 1) end, "a manifest without step",
        "manifest.json", "'step'")

-- Rank 0 replaces value files with `bytes_of[name]` and writes their sizes
-- and checksums into the manifest, as someone crafting a checkpoint would;
-- `try` then runs on every rank; everything is put back after.
local function forged(bytes_of, try)
  local folder = root .. "/explicit/"
  local saved = {}
  acc:wait_for_everyone()
  if acc.is_main_process then
    local manifest = read(folder .. "manifest.json")
    saved["manifest.json"] = manifest
    for name, bytes in pairs(bytes_of) do
      saved[name] = read(folder .. name)
      local digest = ck.write_text(folder .. name, bytes)
      local entry = '"name": "' .. name:gsub("[%.%-]", "%%%0") .. '",(%s*)"format": "lua",(%s*)"size": %d+,(%s*)"crc32c": "%x+"'
      local n
      manifest, n = manifest:gsub(entry, string.format('"name": "%s",%%1"format": "lua",%%2"size": %d,%%3"crc32c": "%s"',
                                                       name, digest.size, digest.crc32c))
      check.equal(n, 1, "the manifest lists " .. name)
    end
    write(folder .. "manifest.json", manifest)
  end
  acc:wait_for_everyone()
  try()
  acc:wait_for_everyone()
  if acc.is_main_process then
    for name, bytes in pairs(saved) do write(folder .. name, bytes) end
  end
  acc:wait_for_everyone()
end

-- Value files that are code, or data claiming more than it holds: refused on
-- every rank, naming the file, and nothing of them runs.
local marker = root .. "/payload_ran"
for _, case in ipairs(hostile(marker)) do
  local what, bytes, words = case[1], case[2], case[3]
  for _, name in ipairs({ "accelerator_state.lua", "dataloader_rank_0.lua" }) do
    forged({ [name] = bytes }, function()
      local weight = model.weight:clone()
      check.raises(function() acc:load_state(root .. "/explicit") end, name .. " holding " .. what, name,
                   unpack(words))
      check.near(model.weight, weight, 0, name .. " holding " .. what .. ": nothing was loaded")
    end)
  end
end
check.truthy(io.open(marker) == nil, "no payload wrote its marker file")

-- Value files of the right form whose fields have the wrong type or range:
-- refused on every rank, naming the file and the field, nothing loaded.
local function with_field(name, key, value)
  local state = serialize.load(read(root .. "/explicit/" .. name), name)
  state[key] = value
  return serialize.dump(state)
end
for _, case in ipairs({
  { "accelerator_state.lua", "sync_steps", "4", "'sync_steps' must be a whole number of at least 0, got \"4\"" },
  { "accelerator_state.lua", "micro_step", 0 / 0, "'micro_step' must be a whole number of at least 0, got NaN" },
  { "accelerator_state.lua", "sync_gradients", 1, "'sync_gradients' must be true or false, got 1" },
  { "accelerator_state.lua", "counts", 3, "'counts' must be a table, got 3" },
  { "accelerator_state.lua", "optimizer_updates", { 1, 2 }, "'optimizer_updates' has 2 entries for 1" },
  { "dataloader_rank_0.lua", "epoch", {}, "'epoch' must be a whole number of at least 0, got a table" },
  { "dataloader_rank_0.lua", "epoch", 0 / 0, "'epoch' must be a whole number of at least 0, got NaN" },
  { "dataloader_rank_0.lua", "batches_done_in_epoch", 2.5, "'batches_done_in_epoch' must be a whole number of at least 0, got 2.5" },
  { "dataloader_rank_0.lua", "shuffle", "no", "'shuffle' must be true or false, got \"no\"" },
}) do
  local name, key, value, says = case[1], case[2], case[3], case[4]
  forged({ [name] = with_field(name, key, value) }, function()
    local weight = model.weight:clone()
    -- Every rank reads accelerator_state.lua; dataloader_rank_0.lua is rank 0's.
    local found_by = name == "accelerator_state.lua" and "ranks 0, 1: " or "rank 0: "
    check.raises(function() acc:load_state(root .. "/explicit") end, name .. " with a bad '" .. key .. "'",
                 found_by, name .. "': ", says)
    check.near(model.weight, weight, 0, name .. " with a bad '" .. key .. "': nothing was loaded")
  end)
end

-- A value file larger than any the engine writes (a sparse 300 MiB file
-- here, its size in the manifest to match) is refused before it is read.
do
  local folder = root .. "/explicit/"
  local name = "accelerator_state.lua"
  local manifest, bytes = read(folder .. "manifest.json"), read(folder .. name)
  acc:wait_for_everyone()
  if acc.is_main_process then
    local huge = 300 * 2 ^ 20
    assert(os.execute(string.format("truncate -s %d '%s'", huge, folder .. name)) == 0)
    local entry = '("name": "accelerator_state%.lua",%s*"format": "lua",%s*"size": )%d+'
    local changed, n = manifest:gsub(entry, "%1" .. string.format("%d", huge))
    check.equal(n, 1, "the manifest lists " .. name)
    write(folder .. "manifest.json", changed)
  end
  acc:wait_for_everyone()
  check.raises(function() acc:load_state(root .. "/explicit") end, "a 300 MiB value file",
               name .. "' is listed at 314572800 bytes; a value file holds at most 268435456")
  acc:wait_for_everyone()
  if acc.is_main_process then
    write(folder .. name, bytes)
    write(folder .. "manifest.json", manifest)
  end
  acc:wait_for_everyone()
end

-- Rank 0 puts what `make(path)` creates in place of `name` (its bytes kept
-- aside); every rank must refuse the checkpoint at once, naming the file.
local function replaced_by(name, make, what, ...)
  local path = root .. "/explicit/" .. name
  acc:wait_for_everyone()
  if acc.is_main_process then
    assert(os.rename(path, path .. ".kept"))
    make(path)
  end
  acc:wait_for_everyone()
  check.raises(function() acc:load_state(root .. "/explicit") end, what, ...)
  acc:wait_for_everyone()
  if acc.is_main_process then
    os.remove(path)
    assert(os.rename(path .. ".kept", path))
  end
  acc:wait_for_everyone()
end

-- A FIFO would block its reader forever; a link leading out of the folder
-- (to a file of the right size and bytes, even) reads what it names.
replaced_by("model.safetensors", function(path) assert(os.execute("mkfifo '" .. path .. "'") == 0) end,
            "a FIFO in place of the weights", "model.safetensors", "not a regular file (a FIFO)")
replaced_by("model.safetensors", function(path)
  assert(os.execute(string.format("cp '%s.kept' '%s/outside.safetensors' && ln -s '%s/outside.safetensors' '%s'",
                                  path, root, root, path)) == 0)
end, "a link out of the folder", "model.safetensors", "leads out of its folder")

-- The untouched checkpoint still loads.
acc:load_state(root .. "/explicit")
check.near(model.weight, saved_weight, 0, "the intact checkpoint loads")

-- Saving over an existing folder replaces it whole.
train(3)
local newer = model.weight:clone()
acc:save_state(root .. "/explicit")
train(1)
acc:load_state(root .. "/explicit")
check.near(model.weight, newer, 0, "the second save replaced the first")

-- A folder without manifest is incomplete; load_state() picks the newest complete one.
check.raises(function() acc:load_state() end, "an empty project", "no complete checkpoint",
             root .. "/project/checkpoints")
check.equal(acc:save_state(), root .. "/project/checkpoints/checkpoint_0", "first automatic name")
local first = model.weight:clone()
train(1)
check.equal(acc:save_state(), root .. "/project/checkpoints/checkpoint_1", "second automatic name")
acc:wait_for_everyone()
if acc.is_main_process then os.remove(root .. "/project/checkpoints/checkpoint_1/manifest.json") end
acc:wait_for_everyone()
check.equal(acc:load_state(), root .. "/project/checkpoints/checkpoint_0", "the incomplete newest is skipped")
check.near(model.weight, first, 0, "checkpoint_0's weights")
check.raises(function() acc:load_state(root .. "/project/checkpoints/checkpoint_1") end,
             "loading the incomplete one by name", "checkpoint_1", "no manifest.json")
check.raises(function() acc:save_state() end, "an automatic name that exists", "checkpoint_1", "already exists")

acc:wait_for_everyone()
if acc.is_main_process then ck.remove_folder(root) end
check.done("checkpoint corruption")
