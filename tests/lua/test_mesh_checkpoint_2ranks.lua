-- nproc: 2
-- Checkpoints under tensor parallelism (accel.ParallelismConfig{tp_size =
-- 2}): a small Llama trained 10 updates straight equals 5 updates, save_state,
-- and a new run built from other weights that load_states and trains 5 more,
-- within 1e-7 (weights when loaded, losses, final weights), for both
-- state-dict types: FULL_STATE_DICT (model.safetensors and
-- optimizer.safetensors hold the unsplit model's state, written once) and
-- SHARDED_STATE_DICT (each rank's own slices and the mesh layout). save_model
-- writes the full weights, equal to one process's training within 1e-5, and
-- load_model gives each rank its slice of them. Loading on another mesh
-- (TP 2 -> 1, 1 -> 2) is tests/launch/test_mesh_checkpoint.sh.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local ck = require("accel.core").formats

local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local acc0 = accel.Accelerator{}
local work = acc0:gather_object(string.format("%s/mesh_checkpoint_%d_%d", root, os.time(), math.random(1e9)))[1]
local rank = acc0.process_index
local TOL = 1e-7

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

local reference_losses, reference_state = mc.reference()

for _, kind in ipairs({ "FULL_STATE_DICT", "SHARDED_STATE_DICT" }) do
  local dir = work .. "/" .. kind
  -- 10 updates straight, saving after the 5th.
  local a = mc.setup{ tp = 2, state_dict_type = kind }
  local at_save
  local losses = mc.train(a, mc.STEPS, { [5] = function()
    a.acc:save_state(dir)
    at_save = a.acc:get_state_dict(a.model)
  end })
  check.equal(#losses, mc.STEPS, kind .. ": updates in the straight run")
  check.near(losses, reference_losses, 1e-5, kind .. ": the straight run's losses against one process's")
  local final = a.acc:get_state_dict(a.model)
  mc.same_state(check, final, reference_state, 1e-5, kind .. ": the straight run's weights against one process's")

  if kind == "FULL_STATE_DICT" then
    check.truthy(exists(dir .. "/model.safetensors") and not exists(dir .. "/model_rank_0.safetensors"),
                 "FULL_STATE_DICT: one model file, no slices")
    -- The checkpoint's model file is the unsplit model, as one process writes it.
    mc.same_state(check, ck.load_weights(dir), at_save, 0, "FULL_STATE_DICT: model.safetensors")
  else
    check.truthy(exists(dir .. "/model_rank_1.safetensors") and exists(dir .. "/optimizer_rank_1.safetensors")
                 and exists(dir .. "/mesh_layout.lua") and not exists(dir .. "/model.safetensors"),
                 "SHARDED_STATE_DICT: each rank's slices and the layout, no full model")
    local layout = require("accel.serialize").load(ck.read_text(dir .. "/mesh_layout.lua", ck.digest(dir .. "/mesh_layout.lua")), "mesh_layout.lua")
    check.equal(layout.mesh.tp, 2, "the layout's tp size")
    check.equal(layout.state_dict_type, "SHARDED_STATE_DICT", "the layout's state-dict type")
  end

  -- A new run from other weights resumes from the checkpoint.
  local b = mc.setup{ tp = 2, seed = 9, state_dict_type = kind }
  check.truthy((b.acc:get_state_dict(b.model)["lm_head.weight"] - at_save["lm_head.weight"]):abs():max():item() > 0.01,
               kind .. ": the resumed run starts from other weights")
  b.acc:load_state(dir)
  mc.same_state(check, b.acc:get_state_dict(b.model), at_save, 0, kind .. ": the weights loaded")
  check.equal(b.opt.updates, 5, kind .. ": the optimizer's updates loaded")
  local rest = mc.train(b, mc.STEPS)
  check.equal(#rest, 5, kind .. ": the loader continues the epoch (5 batches left)")
  for i = 1, 5 do check.near(rest[i], losses[5 + i], TOL, string.format("%s: resumed loss %d", kind, 5 + i)) end
  local largest = mc.same_state(check, b.acc:get_state_dict(b.model), final, TOL, kind .. ": the resumed run's weights")
  if rank == 0 then print(string.format("%s: resumed under tp 2, weights within %g of the straight run", kind, largest)) end

  if kind == "FULL_STATE_DICT" then
    -- save_model: the full weights, written once, in the format without a mesh.
    local files = a.acc:save_model(a.model, work .. "/model")
    if rank == 0 then check.equal(files[1], "model.safetensors", "save_model's file") end
    local written = ck.load_weights(work .. "/model")
    mc.same_state(check, written, final, 0, "save_model under tp 2")
    mc.same_state(check, written, reference_state, 1e-5, "save_model under tp 2 against one process's training")
    -- load_model: each rank keeps its slice of the full weights.
    local c = mc.setup{ tp = 2, seed = 9 }
    c.acc:load_model(c.model, work .. "/model")
    check.equal(c.model:state_dict()["model.layers.0.mlp.gate_proj.weight"]:size(1), 16, "a rank's gate_proj rows")
    mc.same_state(check, c.acc:get_state_dict(c.model), final, 0, "load_model under tp 2")
  end
end

-- A checkpoint whose layout does not fit: the error names the file.
local bad = mc.setup{ tp = 2 }
check.raises(function() bad.acc:load_state(work .. "/nothing_here") end, "a missing checkpoint",
             "nothing_here")

acc0:wait_for_everyone()
if rank == 0 then
  ck.remove_folder(work)
  print(string.format("mesh checkpoint (2 ranks): %d checks passed", check.passed))
end
