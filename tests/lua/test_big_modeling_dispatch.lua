-- nproc: 1
-- accel.load_checkpoint_and_dispatch fills a model built under
-- accel.init_empty_weights from a single safetensors file, a folder of
-- shards and a pytorch_model.bin, giving outputs equal bit for bit to the
-- model it was saved from; with dtype conversion; and with parts on disk,
-- loaded around their forward only. accel.infer_auto_device_map places by
-- max_memory and keeps no_split_module_classes whole. Tied weights stay tied.
-- Large tensors are mapped from the file, privately.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local big_model = dofile(here .. "helpers/big_model.lua")
local ck = require("accel.core").formats

accel.set_seed(3)
local reference = big_model.build()
local ids = big_model.ids()
local function run(model) return accel.no_grad(function() return model(ids) end) end
local expected = run(reference)

local root = os.tmpname()
os.remove(root)
ck.make_empty_folder(root)
local single, shards, pickled = root .. "/single", root .. "/shards", root .. "/pickled"
big_model.save(reference, single)
big_model.save(reference, shards, { max_shard_size = 12000 })
big_model.save(reference, pickled, { safe_serialization = false })
check.truthy(#ck.list_folder(shards) > 2, "the model is written in several shards")

local function same(got, want, what)
  check.equal(got.dtype, want.dtype, what .. ": dtype")
  check.equal((got:double() - want:double()):abs():max():item(), 0, what .. ": largest difference")
end

local x3 = accel.randn(2, 3)

local function dispatched(path, options)
  local model = accel.init_empty_weights(big_model.build)
  local _, map = accel.load_checkpoint_and_dispatch(model, path, options)
  return model, map
end

-- Whole on the CPU, from each format.
for _, case in ipairs({ { "a folder with model.safetensors", single },
                        { "a safetensors file", single .. "/model.safetensors" },
                        { "a folder of shards", shards },
                        { "a pytorch_model.bin", pickled .. "/pytorch_model.bin" } }) do
  local model = dispatched(case[2])
  same(run(model), expected, case[1])
  check.equal(model.positions.dtype, "int64", case[1] .. ": the integer buffer")
end

-- dtype converts floating tensors only; outputs equal the saved model converted.
local converted = big_model.build()
converted:load_state_dict(reference:state_dict())
converted:to(accel.bfloat16)
local bf16 = dispatched(shards, { dtype = accel.bfloat16 })
check.equal(bf16.blocks[2].fc1.weight.dtype, "bfloat16", "a weight loaded as bfloat16")
check.equal(bf16.positions.dtype, "int64", "the integer buffer under dtype = bfloat16")
same(run(bf16), run(converted), "loaded as bfloat16")

-- A table device map with parts on disk: their weights stay on the meta
-- device but for their forward.
local disk_map = { embed = "cpu", ["blocks.1"] = "cpu", ["blocks.2"] = "disk", ["blocks.3.fc1"] = "disk",
                   ["blocks.3.fc2.weight"] = "disk", [""] = "cpu" }
for _, case in ipairs({ { "disk offload from safetensors", shards, {} },
                        { "disk offload through offload_folder", pickled .. "/pytorch_model.bin",
                          { offload_folder = root .. "/offload" } } }) do
  local options = case[3]
  options.device_map = disk_map
  local model = dispatched(case[2], options)
  check.equal(model.blocks[2].fc1.weight.device, "meta", case[1] .. ": an offloaded weight before forward")
  check.equal(model.blocks[3].fc2.bias.device, "cpu", case[1] .. ": a bias kept beside an offloaded weight")
  same(run(model), expected, case[1])
  same(run(model), expected, case[1] .. ", run again")
  check.equal(model.blocks[2].fc1.weight.device, "meta", case[1] .. ": an offloaded weight after forward")
  check.equal(model.blocks[3].fc2.weight.device, "meta", case[1] .. ": an offloaded tensor after forward")
  check.truthy(model.blocks[3].fc2.weight.requires_grad, case[1] .. ": an offloaded weight stays a parameter")
end
-- Where a map names a GPU, each placed module's inputs are brought to its
-- device by wrappers that go around the disk ones (device_alignment.lua,
-- run by tests/gpu/test_gpu_big_model.sh). Attached here with the CPU as
-- the main device, nothing moves and the outputs are unchanged.
local device_alignment = require("accel.big_modeling.device_alignment")
local placement = require("accel.big_modeling.placement")
local aligned = dispatched(shards, { device_map = disk_map })
local placed = placement.resolve("test", aligned, disk_map)
check.equal(device_alignment.main_device(placed), nil, "a map without a GPU has no main device")
local modules = {}
for _, pair in ipairs(aligned:named_modules()) do modules[pair[1]] = pair[2] end
device_alignment.attach(aligned, placed, modules, "cpu")
same(run(aligned), expected, "aligned around disk offload")
check.equal(aligned.blocks[2].fc1.weight.device, "meta", "aligned: the offloaded weight is released again")
-- Offloaded weights are converted too, from the checkpoint and through the folder.
for _, folder in ipairs({ false, root .. "/offload_bf16" }) do
  local model = dispatched(shards, { device_map = disk_map, dtype = accel.bfloat16, offload_folder = folder or nil })
  check.equal(model.blocks[2].fc1.weight.dtype, "bfloat16", "an offloaded weight's dtype under dtype = bfloat16")
  same(run(model), run(converted), "offloaded and loaded as bfloat16" .. (folder and " through offload_folder" or ""))
end

-- A ModuleList placed on disk, whose own forward never runs: its blocks load in turn.
local list_on_disk = dispatched(shards, { device_map = { blocks = "disk", [""] = "cpu" } })
same(run(list_on_disk), expected, "a ModuleList on disk")
check.equal(list_on_disk.blocks[1].norm.weight.device, "meta", "a block's weight after forward")
check.truthy(#ck.list_folder(root .. "/offload") > 0, "offloaded weights are written to offload_folder")
check.raises(function() dispatched(pickled, { device_map = disk_map }) end, "disk offload from .bin without a folder",
             "offload_folder")

-- "auto": the CPU takes what max_memory allows, the rest goes to disk.
local sizes = accel.compute_module_sizes(reference)
local budget = math.floor(sizes[""] / 2)
local auto, auto_map = dispatched(shards, { device_map = "auto", max_memory = { cpu = budget } })
local on_cpu, on_disk = 0, 0
for name, device in pairs(auto_map) do
  if device == "cpu" then on_cpu = on_cpu + sizes[name] else on_disk = on_disk + sizes[name] end
end
check.truthy(on_cpu <= budget and on_disk > 0,
             string.format("auto keeps %d bytes on the CPU within %d, %d on disk", on_cpu, budget, on_disk))
same(run(auto), expected, "device_map = \"auto\" with half the model on disk")
check.truthy(tostring(auto_map):find("device map", 1, true) and tostring(auto_map):find("disk", 1, true),
             "a device map prints its entries")

-- infer_auto_device_map: blocks split into layers unless named in
-- no_split_module_classes; sizes as Accelerate writes them. The map
-- returned is cleaned, as Accelerate's: entries under one module that share
-- a device become that module's (clean_result = false keeps them).
local empty = accel.init_empty_weights(big_model.build)
local block = accel.compute_module_sizes(empty)["blocks.1"]
local budget = { cpu = sizes.embed + sizes.head + block + 2000 }
local split = accel.infer_auto_device_map(empty, { max_memory = budget, clean_result = false })
local whole = accel.infer_auto_device_map(empty, { max_memory = budget, no_split_module_classes = { "Block" } })
local split_layers, whole_blocks = false, true
for name in pairs(split) do if name:match("^blocks%.%d%.") then split_layers = true end end
for name in pairs(whole) do if name:match("^blocks%.%d%.") then whole_blocks = false end end
check.truthy(split_layers, "a block too big for what is left is split into its layers")
check.truthy(whole_blocks, "a Block named in no_split_module_classes is never split")
local cleaned = accel.infer_auto_device_map(empty, { max_memory = budget })
local function entries(map)
  local names = {}
  for name, device in pairs(map) do names[#names + 1] = name .. "=" .. device end
  table.sort(names)
  return table.concat(names, " ")
end
check.equal(entries(split), "blocks.1=cpu blocks.2.fc1=disk blocks.2.fc2=disk blocks.2.norm=disk blocks.3=disk "
            .. "embed=cpu head=disk positions=disk", "as placed")
check.equal(entries(cleaned), "blocks.1=cpu blocks.2=disk blocks.3=disk embed=cpu head=disk positions=disk",
            "cleaned: blocks.2's layers, all on disk, are one entry")
check.equal(entries(accel.infer_auto_device_map(empty, { max_memory = { cpu = "1GiB" } })), "=cpu",
            "\"1GiB\" holds the whole model: one entry for the model")
check.equal(entries(accel.infer_auto_device_map(empty, { max_memory = { cpu = "1KB" } })), "=disk",
            "\"1KB\" holds nothing")
check.raises(function() accel.infer_auto_device_map(empty, { clean_result = "yes" }) end, "clean_result's type",
             "clean_result", "boolean")

-- Errors name what is at fault.
check.raises(function() dispatched(shards, { device_mapp = "auto" }) end, "an unknown option", "device_mapp")
check.raises(function() dispatched(shards, { device_map = { nowhere = "cpu", [""] = "cpu" } }) end,
             "a device map naming no module", "'nowhere'")
check.raises(function() dispatched(shards, { device_map = { embed = "cpu" } }) end, "a device map leaving tensors out",
             "head.weight")
check.raises(function() dispatched(shards, { device_map = { [""] = 0 } }) end, "a GPU where there is none",
             "GPU 0", "no GPU")
check.raises(function() dispatched(shards, { device_map = { [""] = "tpu" } }) end, "an unknown device", "\"tpu\"")
check.raises(function() dispatched(shards, { device_map = "auto", max_memory = { cpu = "2 lots" } }) end,
             "an unreadable size", "max_memory[\"cpu\"]", "2 lots")
check.raises(function() dispatched(root .. "/missing.safetensors") end, "a missing checkpoint", "missing.safetensors")
local wider = accel.nn.Linear(3, 5)
local narrow_dir = root .. "/narrow"
big_model.save(accel.nn.Linear(3, 4), narrow_dir)
check.raises(function() accel.load_checkpoint_and_dispatch(wider, narrow_dir) end, "a shape that differs",
             "'weight'", "[4, 3]", "[5, 3]")
check.raises(function() accel.load_checkpoint_and_dispatch(big_model.build(), narrow_dir) end,
             "a checkpoint lacking tensors", "lacks", "embed.weight")

-- Without dtype, floating tensors take the model's dtype (as Accelerate):
-- a float64 bias lands in a float32 Linear as float32 and computes as the
-- float32 layer would; an integer tensor for a floating parameter is
-- refused, naming the file, the tensor and both dtypes.
local source = accel.nn.Linear(3, 4)
local mixed_dir = root .. "/mixed"
ck.save_weights(mixed_dir, { { "weight", source.weight }, { "bias", source.bias:double() } }, {})
local into = accel.init_empty_weights(function() return accel.nn.Linear(3, 4) end)
accel.load_checkpoint_and_dispatch(into, mixed_dir)
check.equal(into.bias.dtype, "float32", "a float64 bias loads into a float32 model as float32")
same(accel.no_grad(function() return into(x3) end), accel.no_grad(function() return source(x3) end),
     "and the layer computes as the saved one")
local int_dir = root .. "/int8"
ck.save_weights(int_dir, { { "weight", source.weight }, { "bias", accel.ones(4, { dtype = accel.int8 }) } }, {})
check.raises(function()
  accel.load_checkpoint_and_dispatch(accel.init_empty_weights(function() return accel.nn.Linear(3, 4) end), int_dir)
end, "an int8 tensor for a floating parameter is refused", "'bias' in '" .. int_dir,
     "is int8 in the checkpoint but float32 in the model")

-- Tied weights: one tensor shared by two modules is saved once and loaded
-- once, still shared; placing its names apart is refused, naming both.
local Tied = accel.nn.Module:extend("Tied")
function Tied:init()
  self.a = accel.nn.Linear(3, 3)
  self.b = accel.nn.Linear(3, 3)
  self.b.weight = self.a.weight
end
function Tied:forward(x) return self.b(self.a(x)) end
local tied = Tied()
local tied_dir = root .. "/tied"
big_model.save(tied, tied_dir)
check.raises(function() ck.open_weights(tied_dir):info("b.weight") end, "a tied tensor is saved once", "b.weight")
local x = accel.randn(2, 3)
local empty_tied = accel.init_empty_weights(function() return Tied() end)
accel.load_checkpoint_and_dispatch(empty_tied, tied_dir)
check.truthy(rawequal(empty_tied.a.weight, empty_tied.b.weight), "tied weights stay one tensor")
same(accel.no_grad(function() return empty_tied(x) end), accel.no_grad(function() return tied(x) end), "tied model")
check.raises(function()
  accel.load_checkpoint_and_dispatch(accel.init_empty_weights(function() return Tied() end), tied_dir,
                                     { device_map = { a = "cpu", b = "disk" } })
end, "tied weights placed apart", "'a.weight' and 'b.weight' are one tensor (tied weights)", "cpu and disk")

-- Tensors of a megabyte and more are used where they lie in the file (a
-- private, copy-on-write mapping): training the loaded model changes the
-- model, never the file.
local function wide_layer() return accel.nn.Linear(1024, 512) end
local wide = wide_layer()
ck.save_weights(root .. "/wide", { { "weight", wide.weight }, { "bias", wide.bias } }, {})
local x = accel.randn(4, 1024)
local mapped = accel.init_empty_weights(wide_layer)
accel.load_checkpoint_and_dispatch(mapped, root .. "/wide")
local proc_maps = io.open("/proc/self/maps")
local maps = proc_maps:read("*a")
proc_maps:close()
check.truthy(maps:find(root .. "/wide/model.safetensors", 1, true), "the weight is mapped from its file")
same(accel.no_grad(function() return mapped(x) end), accel.no_grad(function() return wide(x) end),
     "a mapped weight's output")
local sgd = accel.optim.SGD(mapped:parameters(), { lr = 0.5 })
mapped(x):sum():backward()
sgd:step()
check.truthy((mapped.weight - wide.weight):abs():max():item() > 0, "a step changes the mapped weight")
local reloaded = accel.init_empty_weights(wide_layer)
accel.load_checkpoint_and_dispatch(reloaded, root .. "/wide")
same(reloaded.weight, wide.weight, "the file, after training the model mapped from it")

ck.remove_folder(root)
check.done("test_big_modeling_dispatch")
