-- nproc: 2
-- A mesh or sharded checkpoint's layout files are data anyone could have
-- written: every field the load reads is checked against the tensors and
-- files it describes, and a tensor of another kind than the model's (int8
-- where it holds floats) is refused, each naming the file and the field or
-- tensor, before anything changes. Three real checkpoints of a small Llama
-- on 2 ranks, SHARDED_STATE_DICT: tp 2 (each rank's slices, mesh_layout.lua),
-- FSDP 2 on a mesh (flat shards, model_sharding.lua and mesh_layout.lua) and
-- FSDP 2 without one (flat shards). Rank 0 forges one file at a time,
-- writing its size and checksum into the manifest as someone crafting a
-- checkpoint would; every rank then loads it on another layout.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local read = dofile(here .. "helpers/read_file.lua")
local serialize = require("accel.serialize")
local sorted_keys = require("accel.util.sorted_keys")
local ck = require("accel.core").formats

local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local acc0 = accel.Accelerator{}
local work = acc0:gather_object(string.format("%s/mesh_layout_hostile_%d_%d", root, os.time(), math.random(1e9)))[1]
local main = acc0.is_main_process

local function save(dir, run)
  mc.train(run, 1)
  run.acc:save_state(dir)
  return dir
end
local tp2 = save(work .. "/tp2", mc.setup{ tp = 2, state_dict_type = "SHARDED_STATE_DICT" })
local fsdp_mesh = save(work .. "/fsdp_mesh", mc.setup{ dp_shard = 2, state_dict_type = "SHARDED_STATE_DICT" })
-- FSDP without a mesh.
local function plain_fsdp(seed)
  local acc = accel.Accelerator{ fsdp_plugin = accel.FullyShardedDataParallelPlugin{
    state_dict_type = "SHARDED_STATE_DICT", transformer_layer_cls = "LlamaDecoderLayer" } }
  local model = mc.build(seed)
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
  local sched = accel.optim.lr_scheduler.cosine(opt, { warmup = 2, total = mc.STEPS })
  local loader = accel.data.DataLoader(accel.data.TensorDataset(mc.data()), { batch_size = 2, shuffle = true })
  model, opt, loader, sched = acc:prepare(model, opt, loader, sched)
  return { acc = acc, model = model, opt = opt, sched = sched, loader = loader }
end
local fsdp = save(work .. "/fsdp", plain_fsdp(1))

local function value(path) return serialize.load(read(path), path) end

-- Rank 0 replaces files of `folder` (name -> the bytes of a value file, or
-- {{name, tensor}, ...} of a tensor file) and their manifest entries; every
-- rank then runs `try`; everything is put back after.
local function forged(folder, files, try)
  acc0:wait_for_everyone()
  local saved = {}
  if main then
    local manifest = ck.read_manifest(folder)
    saved["manifest.json"] = read(folder .. "/manifest.json")
    for name, content in pairs(files) do
      local path = folder .. "/" .. name
      saved[name] = read(path)
      local digest = type(content) == "string" and ck.write_text(path, content) or ck.write_safetensors(path, content)
      local found = false
      for _, f in ipairs(manifest.files) do
        if f.name == name then f.size, f.crc32c, found = digest.size, digest.crc32c, true end
      end
      check.truthy(found, "the manifest lists " .. name)
    end
    ck.write_manifest(folder, manifest)
  end
  acc0:wait_for_everyone()
  try()
  acc0:wait_for_everyone()
  if main then
    for name, bytes in pairs(saved) do
      local f = assert(io.open(folder .. "/" .. name, "wb"))
      f:write(bytes)
      f:close()
    end
  end
  acc0:wait_for_everyone()
end

-- `folder`'s layout file `name` changed by `change(layout)` must be refused
-- by a load on `target` (a run), the error naming the file and `words`.
local function refused(folder, name, change, target, what, ...)
  local layout = value(folder .. "/" .. name)
  change(layout)
  local words = { ... }
  forged(folder, { [name] = serialize.dump(layout) }, function()
    local weight = target.model:parameters()[1]:clone()
    check.raises(function() target.acc:load_state(folder) end, what, "ranks 0, 1: ", name, unpack(words))
    check.near(target.model:parameters()[1], weight, 0, what .. ": nothing was loaded")
  end)
end

-- Tensor file `name` of `folder` with `change(state)` applied to its tensors.
local function tensors_with(folder, name, change)
  local state = ck.read_safetensors(folder .. "/" .. name)
  change(state)
  local pairs_out = {}
  for _, key in ipairs(sorted_keys(state)) do pairs_out[#pairs_out + 1] = { key, state[key] } end
  return pairs_out
end

-- The loads: on 2 ranks without a mesh (DDP), under tp 2, under FSDP 2 on a mesh.
local ddp = mc.setup{ seed = 3 }
local tp = mc.setup{ tp = 2, seed = 3 }
local on_fsdp = mc.setup{ dp_shard = 2, seed = 3 }
for _, case in ipairs({ { tp2, ddp }, { fsdp_mesh, tp }, { fsdp, ddp }, { tp2, on_fsdp } }) do
  case[2].acc:load_state(case[1])
end
check.truthy(true, "every checkpoint as saved loads on another layout")

-- tp 2's mesh layout, loaded without a mesh: the slices are cut by it.
local split = value(tp2 .. "/mesh_layout.lua").models[1][1]
local M = "mesh_layout.lua"
for _, case in ipairs({
  -- Fields of the wrong type or range.
  { function(l) l.mesh.tp = "2" end, "a mesh size that is a string", "'tp' must be a whole number of at least 1, got \"2\"" },
  { function(l) l.mesh.cp = nil end, "a missing mesh size", "'cp' must be a whole number of at least 1, got nil" },
  { function(l) l.world_size = 0 / 0 end, "a NaN world_size", "'world_size' must be a whole number of at least 1, got NaN" },
  { function(l) l.models[1][1].dim = 1.5 end, "a split dim that is not whole", "'dim' must be a whole number of at least 1, got 1.5" },
  { function(l) l.models[1][1].name = 4 end, "a split name that is a number", "'name' must be a string, got 4" },
  { function(l) l.optimizers[1][1].index = 0 / 0 end, "a NaN optimizer index",
    "(optimizers[1]): 'index' must be a whole number of at least 0, got NaN" },
  { function(l) l.optimizers[1][1].index = -1 end, "a negative optimizer index", "'index' must be a whole number of at least 0, got -1" },
  { function(l) l.optimizers[1][1].index = 2.5 end, "an optimizer index that is not whole", "got 2.5" },
  { function(l) l.state_dict_type = nil end, "a missing state-dict type", "'state_dict_type' must be FULL_STATE_DICT or SHARDED_STATE_DICT" },
  -- Fields of the right kind that disagree with the checkpoint.
  { function(l) l.mesh.tp, l.world_size = 4, 4 end, "a mesh of 4 ranks for 2 ranks' files",
    "says world_size 4 but the checkpoint was saved on 2 process(es)" },
  { function(l) l.models[1][1].dim = 3 end, "a split dim past the tensor's dims",
    "splits '" .. split.name .. "' of model_rank_0.safetensors along dim 3, but the tensor has 2 dims" },
  { function(l) table.insert(l.models[1], { name = "model.nothing.weight", dim = 1 }) end, "a split of a tensor the file lacks",
    "splits 'model.nothing.weight', which model_rank_0.safetensors does not hold" },
  { function(l) table.insert(l.models[1], { name = split.name, dim = 2 }) end, "a tensor split twice",
    "'name' " .. split.name .. " is listed twice" },
  { function(l) table.insert(l.optimizers[1], { index = 100000, dim = 1 }) end, "a split of a parameter the optimizer lacks",
    "splits the state of parameter 100000, which optimizer_rank_0.safetensors does not hold" },
  { function(l) l.optimizers[1][1].dim = 4 end, "an optimizer split past its state's dims",
    "splits the state of parameter " .. value(tp2 .. "/mesh_layout.lua").optimizers[1][1].index
      .. " of optimizer_rank_0.safetensors along dim 4, but the tensor has 2 dims" },
}) do
  refused(tp2, M, case[1], ddp, "tp 2's mesh layout with " .. case[2], case[3])
end

-- FSDP on a mesh, loaded under tp 2: its flat layout and the mesh layout
-- splitting the parameters it names.
local S = "model_sharding.lua"
local flats = value(fsdp_mesh .. "/" .. S)
local matrix, several  -- a parameter of 2 dims; a flat parameter of several parameters
for k, flat in ipairs(flats.flats) do
  for _, p in ipairs(flat.params) do
    if #p.shape == 2 then matrix = matrix or p end
  end
  if #flat.params >= 2 then several = several or k end
end
local twice = flats.flats[several].params[1].name
refused(fsdp_mesh, M, function(l) table.insert(l.models[1], { name = matrix.name, dim = 3 }) end, tp,
        "a split dim past a flat parameter's dims", "splits '" .. matrix.name .. "' of '", S,
        "' along dim 3, but the tensor has 2 dims")
refused(fsdp_mesh, M, function(l) table.insert(l.models[1], { name = "model.nothing.weight", dim = 1 }) end, tp,
        "a split of a parameter the flat layout lacks", "splits 'model.nothing.weight', which '")
for _, case in ipairs({
  { function(l) l.optimizer = 5 end, "an optimizer past the checkpoint's", "'optimizer' is 5 but the checkpoint holds 1 optimizer(s)" },
  { function(l) l.optimizer = "1" end, "an optimizer that is a string", "optimizer must be a whole number of at least 1" },
  { function(l) l.flats[several].params[2].name = twice end, "a parameter listed twice",
    "flats[" .. several .. "].params[2] names '" .. twice .. "', listed twice" },
  { function(l) l.flats[1].params[1].offset = 0 / 0 end, "a NaN offset", "flats[1].params[1].offset must be a whole number" },
  { function(l) l.flats[1].shard_numel = -1 end, "a negative shard size", "flats[1].shard_numel must be a whole number of at least 0, got -1" },
  { function(l) l.flats[1].params[1].shape = { "2" } end, "a size that is a string", "flats[1].params[1].shape[1] must be a whole number" },
  { function(l) l.world_size = 4 end, "shards over 4 ranks on a mesh of 2", "cuts flat parameters over 4 rank(s)" },
}) do
  refused(fsdp_mesh, S, case[1], tp, "FSDP on a mesh: a flat layout with " .. case[2], case[3])
end
-- A model file holding a flat parameter the layout does not list.
forged(fsdp_mesh, { ["model_rank_0.safetensors"] = tensors_with(fsdp_mesh, "model_rank_0.safetensors", function(t)
  t.flat_99 = accel.zeros(4)
end) }, function()
  check.raises(function() tp.acc:load_state(fsdp_mesh) end, "a flat parameter the layout does not list",
               "'model_rank_0.safetensors' holds 'flat_99' but '", S, "' lists " .. #flats.flats .. " flat parameter(s)")
end)

-- FSDP without a mesh, loaded without sharding: the shards joined by its layout.
refused(fsdp, S, function(l) l.world_size = 4 end, ddp, "FSDP: shards over 4 ranks saved on 2",
        "cuts flat parameters over 4 rank(s) but the checkpoint was saved on 2 process(es)")
refused(fsdp, S, function(l) l.optimizer = 2 end, ddp, "FSDP: an optimizer past the checkpoint's",
        "'optimizer' is 2 but the checkpoint holds 1 optimizer(s)")

-- Integer tensors: refused where the model holds floating point, naming the
-- file and the tensor, not turned into floats.
local function as_int8(name) return function(t) t[name] = t[name]:to("int8") end end
local q = split.name
local both = {
  ["model_rank_0.safetensors"] = tensors_with(tp2, "model_rank_0.safetensors", as_int8(q)),
  ["model_rank_1.safetensors"] = tensors_with(tp2, "model_rank_1.safetensors", as_int8(q)),
}
forged(tp2, both, function()
  check.raises(function() ddp.acc:load_state(tp2) end, "tp 2: int8 slices loaded without a mesh",
               "model_rank_", "'" .. q .. "' is int8 in the checkpoint but float32 in the model")
  check.raises(function() on_fsdp.acc:load_state(tp2) end, "tp 2: int8 slices loaded into flat shards",
               "'" .. q .. "' is int8 in the checkpoint but float32 in the model")
end)
forged(tp2, { ["model_rank_1.safetensors"] = both["model_rank_1.safetensors"] }, function()
  check.raises(function() ddp.acc:load_state(tp2) end, "tp 2: one rank's slice int8",
               "tp rank 1's '" .. q .. "' is int8 where tp rank 0's is float32")
end)
local ok, optimizer_state = pcall(ck.read_safetensors, tp2 .. "/optimizer_rank_0.safetensors")
check.truthy(ok, "tp 2's optimizer file reads")
local moment
for _, key in ipairs(sorted_keys(optimizer_state)) do  -- the same on every rank
  if key:match("^state%.%d+%.exp_avg$") and optimizer_state[key]:dim() > 0 then moment = moment or key end
end
forged(tp2, {
  ["optimizer_rank_0.safetensors"] = tensors_with(tp2, "optimizer_rank_0.safetensors", as_int8(moment)),
  ["optimizer_rank_1.safetensors"] = tensors_with(tp2, "optimizer_rank_1.safetensors", as_int8(moment)),
}, function()
  check.raises(function() ddp.acc:load_state(tp2) end, "tp 2: an int8 optimizer moment",
               "optimizer_rank_", "'" .. moment .. "' is int8, but an optimizer's state of a parameter is floating point")
end)
for _, case in ipairs({ { fsdp_mesh, tp, "FSDP on a mesh" }, { fsdp, ddp, "FSDP" } }) do
  local folder, target = case[1], case[2]
  local rank1 = tensors_with(folder, "model_rank_1.safetensors", as_int8("flat_1"))
  forged(folder, { ["model_rank_1.safetensors"] = rank1 }, function()
    check.raises(function() target.acc:load_state(folder) end, case[3] .. ": one rank's shard int8",
                 "rank 1's 'flat_1' is int8 where the first shard's is float32")
  end)
  forged(folder, { ["model_rank_1.safetensors"] = rank1,
                   ["model_rank_0.safetensors"] = tensors_with(folder, "model_rank_0.safetensors", as_int8("flat_1")) },
    function()
      check.raises(function() target.acc:load_state(folder) end, case[3] .. ": every shard int8",
                   "is int8 in the checkpoint but float32 in the model")
    end)
end

-- After all that, the checkpoints as saved still load.
tp.acc:load_state(fsdp_mesh)
ddp.acc:load_state(tp2)
acc0:wait_for_everyone()
if main then ck.remove_folder(work) end
check.done("test_mesh_layout_hostile")
