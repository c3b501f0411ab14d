-- Checkpoints across meshes, each run a fresh launch, for
-- tests/launch/test_mesh_checkpoint.sh (the training is
-- tests/lua/helpers/mesh_checkpoint_check.lua's small Llama):
--
--   accel-run mesh_checkpoint.lua --nproc N -- save DIR MESH TYPE
--     MESH: 0 (no mesh, plain one process), a tp size, or sizes such as
--     tp=2,dp_shard=2, dp_replicate=2,dp_shard=2 (FSDP on the mesh) or
--     dp_shard=2,cp=2 (FSDP over dp_shard x cp, the model context parallel)
--     10 updates on MESH, their losses and final weights one process's
--     within 1e-5, save_state(DIR/checkpoint) after the 5th with state-dict
--     type TYPE; then DIR/after (save_model of the final weights) and
--     DIR/losses.lua
--   accel-run mesh_checkpoint.lua --nproc N -- resume DIR MESH TOL
--     a run on MESH built from other weights: load_state(DIR/checkpoint),
--     the 5 updates left, the losses and final weights against DIR's within TOL
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "../lua/helpers/check.lua")
local mc = dofile(here .. "../lua/helpers/mesh_checkpoint_check.lua")
local serialize = require("accel.serialize")
local ck = require("accel.core").formats

local mode, dir, spec = arg[1], arg[2], arg[3]

-- mc.setup's options for MESH.
local function mesh_options(o)
  if tonumber(spec) then
    o.tp = tonumber(spec) > 0 and tonumber(spec) or nil
    return o
  end
  for key, size in spec:gmatch("([%w_]+)=(%d+)") do
    if key ~= "tp" and key ~= "dp_shard" and key ~= "dp_replicate" and key ~= "cp" then
      error("mesh_checkpoint.lua: unknown size " .. key .. " (tp, dp_shard, dp_replicate, cp)")
    end
    o[key] = tonumber(size)
  end
  return o
end

if mode == "save" then
  local run = mc.setup(mesh_options{ state_dict_type = arg[4] })
  local losses = mc.train(run, mc.STEPS, { [5] = function() run.acc:save_state(dir .. "/checkpoint") end })
  run.acc:save_model(run.model, dir .. "/after")
  -- What a resumed run is held to is one process's training, on any mesh.
  local reference_losses, reference_state = mc.reference()
  check.near(losses, reference_losses, 1e-5, spec .. ": the saving run's losses against one process's")
  mc.same_state(check, ck.load_weights(dir .. "/after"), reference_state, 1e-5,
                spec .. ": the saving run's final weights against one process's")
  if run.acc.is_main_process then
    local f = assert(io.open(dir .. "/losses.lua", "wb"))
    f:write(serialize.dump(losses))
    f:close()
  end
  run.acc:print(string.format("mesh checkpoint save: %s, %s", spec, arg[4]))
elseif mode == "resume" then
  local tol = tonumber(arg[4])
  local run = mc.setup(mesh_options{ seed = 9 })
  run.acc:load_state(dir .. "/checkpoint")
  local rest = mc.train(run, mc.STEPS)
  local f = assert(io.open(dir .. "/losses.lua", "rb"))
  local losses = serialize.load(f:read("*a"), dir .. "/losses.lua")
  f:close()
  check.equal(#rest, 5, "updates left in the epoch")
  for i = 1, 5 do check.near(rest[i], losses[5 + i], tol, "resumed loss " .. (5 + i)) end
  local largest = mc.same_state(check, run.acc:get_state_dict(run.model), ck.load_weights(dir .. "/after"), tol,
                                "the resumed run's weights")
  run.acc:print(string.format("mesh checkpoint resume: %s, losses and weights within %g (largest difference %g)",
                              spec, tol, largest))
else
  error("mesh_checkpoint.lua: mode must be save or resume, got " .. tostring(mode))
end
