-- nproc: 4
-- Context parallelism with FSDP on the device mesh, FSDP 2 x CP 2
-- (ParallelismConfig{dp_shard_size = 2, cp_size = 2}): FULL_SHARD over the
-- flattened dp_shard x cp group (mesh.dp_shard_cp, torchtitan's), the cp
-- ranks of one batch holding different tokens of it. A small Llama (dropout
-- off, each decoder layer a unit) trains 10 AdamW steps with clipping to the
-- global norm, each step accumulated over 2 micro-steps, to one process's
-- losses, norms and weights within 1e-5 (helpers/tensor_parallel_check.lua);
-- each rank holds 1/4 of the model, its optimizer state included
-- (helpers/fsdp_mesh_check.lua). Checkpoints: 10 updates straight equal 5,
-- save_state, and a run from other weights that load_states and trains 5
-- more, within 1e-7 on the same mesh, for FULL_STATE_DICT (model.safetensors
-- the full model, save_model's weights one process's within 1e-5) and
-- SHARDED_STATE_DICT (each rank's flat shards), which also resumes on FSDP 4
-- without cp within 1e-5 (the shards joined from all four files).
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local tp_check = dofile(here .. "helpers/tensor_parallel_check.lua")
local fsdp_mesh_check = dofile(here .. "helpers/fsdp_mesh_check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local ck = require("accel.core").formats

local o = { name = "FSDP 2 x CP 2", dp_shard = 2, cp = 2, tp = 1, plan = "none", accumulation = 2,
            fsdp_plugin = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" } }
local acc, model, opt = tp_check.run(check, o)
local mesh, rank = acc.mesh, acc.process_index
-- rank = dp_shard rank x 2 + cp rank: cp groups {0,1} {2,3}, dp_shard (and dp) groups {0,2} {1,3}.
check.equal(table.concat(mesh.cp.ranks, ","), 2 * math.floor(rank / 2) .. "," .. 2 * math.floor(rank / 2) + 1, "cp group")
check.equal(table.concat(mesh.dp.ranks, ","), rank % 2 .. "," .. rank % 2 + 2, "dp group: the loader's")
check.equal(table.concat(mesh.dp_shard_cp.ranks, ","), "0,1,2,3", "dp_shard_cp: the shard group spans dp_shard x cp")
check.equal(mesh.dp_shard_cp.rank, rank, "this rank's place in the shard group")
local shard, whole = fsdp_mesh_check.shares(check, acc, model, opt, o, o.name)
check.truthy(math.abs(shard / whole - 1 / 4) < 0.01,
             string.format("this rank holds %d of the model's %d elements: a quarter (up to padding)", shard, whole))
local work = acc:gather_object(string.format("%s/cp_fsdp_%d_%d", os.getenv("ACCEL_TEST_TMPDIR") or "/tmp", os.time(),
                                             math.random(1e9)))[1]
acc:free_memory()

-- The names of the files a checkpoint folder holds, as a set.
local function files_in(dir)
  local set = {}
  for _, name in ipairs(ck.list_folder(dir)) do set[name] = true end
  return set
end

local reference_losses, reference_state = mc.reference()
for _, kind in ipairs({ "FULL_STATE_DICT", "SHARDED_STATE_DICT" }) do
  local dir = work .. "/" .. kind
  local a = mc.setup{ dp_shard = 2, cp = 2, state_dict_type = kind }
  local at_save
  local losses = mc.train(a, mc.STEPS, { [5] = function()
    a.acc:save_state(dir)
    at_save = a.acc:get_state_dict(a.model)
  end })
  check.near(losses, reference_losses, 1e-5, kind .. ": the straight run's losses against one process's")
  local final = a.acc:get_state_dict(a.model)
  mc.same_state(check, final, reference_state, 1e-5, kind .. ": the straight run's weights against one process's")

  local b = mc.setup{ dp_shard = 2, cp = 2, seed = 9, state_dict_type = kind }
  b.acc:load_state(dir)
  mc.same_state(check, b.acc:get_state_dict(b.model), at_save, 0, kind .. ": the weights loaded")
  local rest = mc.train(b, mc.STEPS)
  check.equal(#rest, 5, kind .. ": the loader continues the epoch (5 batches left)")
  for i = 1, 5 do check.near(rest[i], losses[5 + i], 1e-7, string.format("%s: resumed loss %d", kind, 5 + i)) end
  mc.same_state(check, b.acc:get_state_dict(b.model), final, 1e-7, kind .. ": the resumed run's weights")

  if kind == "FULL_STATE_DICT" then
    local files = files_in(dir)
    check.truthy(files["model.safetensors"] and not files["model_rank_0.safetensors"],
                 "FULL_STATE_DICT: one model file, no shards")
    mc.same_state(check, ck.load_weights(dir), at_save, 0, "FULL_STATE_DICT: model.safetensors is the full model")
    a.acc:save_model(a.model, work .. "/model")
    local written = ck.load_weights(work .. "/model")
    mc.same_state(check, written, final, 0, "save_model under FSDP 2 x CP 2")
    mc.same_state(check, written, reference_state, 1e-5, "save_model under FSDP 2 x CP 2 against one process's training")
  else
    local files = files_in(dir)
    check.truthy(files["model_rank_3.safetensors"] and files["model_sharding.lua"] and not files["model.safetensors"],
                 "SHARDED_STATE_DICT: each rank's flat shards")
    -- On another mesh the full state is joined from the shards of all four ranks.
    local c = mc.setup{ dp_shard = 4, seed = 9, state_dict_type = kind }
    c.acc:load_state(dir)
    mc.same_state(check, c.acc:get_state_dict(c.model), at_save, 0, "SHARDED_STATE_DICT: loaded on FSDP 4")
    local moved = mc.train(c, mc.STEPS)
    for i = 1, 5 do check.near(moved[i], losses[5 + i], 1e-5, string.format("resumed on FSDP 4: loss %d", 5 + i)) end
    mc.same_state(check, c.acc:get_state_dict(c.model), final, 1e-5, "resumed on FSDP 4: the weights")
  end
end

acc:wait_for_everyone()
if rank == 0 then ck.remove_folder(work) end
check.done("test_cp_fsdp_4ranks")
