-- A mesh checkpoint's layout is a file: a split dim past a tensor's dims,
-- read when the checkpoint is loaded on another mesh, is an error naming
-- the layout, the tensor and its file, not Lua arithmetic on nil.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_slices = require("accel.parallel.checkpoint.tp_slices")

local files = {
  keys = function() return { "layers.0.weight", "layers.0.bias" } end,
  info = function(_, key) return { shape = key:find("weight") and { 4, 4 } or { 4 }, dtype = "float32" } end,
  tensor = function() return nil end,
}
local function name_of(r) return "model_tp" .. r .. ".safetensors" end

local source = tp_slices.slices_source(files, "model", name_of, 2, { ["layers.0.weight"] = 2 }, "layout.lua")
check.equal(table.concat(source.entries["layers.0.weight"].shape, "x"), "4x8", "a split dim within the tensor")
check.raises(function()
  tp_slices.slices_source(files, "model", name_of, 2, { ["layers.0.bias"] = 3 }, "layout.lua")
end, "a split dim past the tensor's dims", "'layout.lua' splits 'layers.0.bias' of model_tp0.safetensors along dim 3",
             "the tensor has 1 dims")
check.done("test_mesh_layout_dims")
