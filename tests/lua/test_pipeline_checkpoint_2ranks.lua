-- nproc: 2
-- Checkpoints of a pipeline at PP 2 (docs/api/parallelism.md, "Checkpoints
-- of a pipeline"), in one launch; across launches and meshes (PP 2 -> one
-- process, one process -> PP 2, PP 2 x DP 2, other stage cuts) is
-- tests/launch/test_pipeline_checkpoint.sh. A small Llama with tied
-- embeddings (the weight on both ranks) trained 6 AdamW steps of 2
-- micro-steps with clipping: saved mid-accumulation (after step 3's first
-- micro-step: the summed gradients are saved too) and at step 4, each
-- loaded by a fresh Accelerator on a model built from other weights, its
-- training then equal to the uninterrupted run's (1e-7), whose weights are
-- one process's (1e-5). The files hold the whole model's names, each rank's
-- own stages; an optimizer made after prepare (of the stages' parameters
-- only) resumes alike. get_state_dict gives one process's state dict on
-- every rank (names and values), save_model writes it as one process
-- would, load_model gives each rank its stages' of it; an asynchronous
-- save's checkpoint loads alike. An nn.Sequential
-- resumes alike, under its own names. Data parallel's checkpoint loads at
-- PP 2, one of an optimizer of some parameters only is refused. A SHARDED_STATE_DICT
-- checkpoint of a mesh without a pipeline (tp 2) is refused naming it, so
-- are forged layouts and files, and
-- join_uneven_inputs still is.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local pipeline_check = dofile(here .. "helpers/pipeline_check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local core = require("accel.core")
local ck = core.formats
local sorted_keys = require("accel.util.sorted_keys")

local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local acc0 = accel.Accelerator{}
local work = acc0:gather_object(string.format("%s/pipeline_checkpoint_%d_%d", root, os.time(), math.random(1e9)))[1]
local rank = acc0.process_index
local STEPS, ACCUMULATION, ROWS, MAX_NORM, TOL = 6, 2, pipeline_check.ROWS, 0.5, 1e-7
local CONFIG = { tie_word_embeddings = true }

local function build(seed)
  local cfg = {}
  for k, v in pairs(pipeline_check.TINY) do cfg[k] = v end
  for k, v in pairs(CONFIG) do cfg[k] = v end
  accel.set_seed(seed)
  return accel.models.from_config(cfg):train()
end

local function adamw(params) return accel.optim.AdamW(params, { lr = 1e-2, weight_decay = 0.01 }) end

-- A prepared PP 2 run on a model from `seed`; with `after`, the optimizer is
-- made after prepare, of the stages' parameters.
local function setup(seed, after)
  local acc = accel.Accelerator{ gradient_accumulation_steps = ACCUMULATION,
    parallelism_config = accel.ParallelismConfig{ pp_size = 2, pp_schedule = "1F1B", pp_microbatches = 4 } }
  local base = build(seed)
  local model, opt
  if after then
    model = acc:prepare(base)
    opt = acc:prepare(adamw(model:parameters()))
  else
    model, opt = acc:prepare(base, adamw(base:parameters()))
  end
  return { acc = acc, model = model, opt = opt }
end

-- The micro-steps (step, micro) in order, from number `first`; after
-- micro-step k runs hooks[k]. Returns the losses of the synchronised micro-steps.
local function train(run, first, hooks)
  return pipeline_check.micro_steps(run, { steps = STEPS, accumulation = ACCUMULATION, max_norm = MAX_NORM }, first,
                                    hooks)
end

-- One process, the same micro-steps: its state dict after STEPS steps.
local function reference()
  local model = build(1)
  local opt = adamw(model:parameters())
  for step = 1, STEPS do
    local batch = pipeline_check.batch(step)
    for micro = 1, ACCUMULATION do
      local x = batch:narrow(1, (micro - 1) * ROWS / ACCUMULATION + 1, ROWS / ACCUMULATION)
      local loss = model{ input_ids = x, labels = x }.loss / ACCUMULATION
      loss:backward()
    end
    core.clip_grad_norm(model:parameters(), MAX_NORM)
    opt:step()
    opt:zero_grad()
  end
  return model:state_dict()
end
local reference_state = reference()

-- The whole model's names (one process's state dict) of a safetensors file.
local function names_of(path)
  local reader, out = ck.open_weights(path), {}
  for _, name in ipairs(reader:names()) do out[name] = true end
  reader:close()
  return out
end

for _, after in ipairs({ false, true }) do
  local what = after and "the optimizer made after prepare" or "the optimizer made before prepare"
  local dir = string.format("%s/%s", work, after and "after" or "before")
  local run = setup(1, after)
  -- Micro-step 5 is step 3's first (gradients pending), 8 step 4's last.
  local full_losses = train(run, 1, { [5] = function() run.acc:save_state(dir .. "/mid") end,
                                      [8] = function() run.acc:save_state(dir .. "/step4") end })
  local full = run.acc:get_state_dict(run.model)
  mc.same_state(check, full, reference_state, 1e-5, what .. ": get_state_dict against one process's")
  if not after then
    -- Each rank's file holds its own stages' tensors, under the whole model's names.
    local own = names_of(dir .. "/step4/model_rank_" .. rank .. ".safetensors")
    local held = run.model:layer_names()
    check.truthy(own[held[1] == "embed_tokens" and "model.embed_tokens.weight" or "model.norm.weight"],
                 string.format("rank %d's file names its stages' tensors as the whole model does", rank))
    check.truthy(not own[rank == 0 and "model.norm.weight" or "model.layers.0.self_attn.q_proj.weight"],
                 string.format("rank %d's file holds none of the other rank's stages", rank))
    -- The tied weight, in rank 1's lm_head, is written under its one name.
    check.truthy(own["model.embed_tokens.weight"] and not own["lm_head.weight"],
                 string.format("rank %d writes the tied weight under its one name", rank))
    run.acc:save_model(run.model, dir .. "/weights")
    local saved = ck.load_weights(dir .. "/weights")
    mc.same_state(check, saved, full, 0, what .. ": save_model writes get_state_dict's weights by the whole names")
    local fresh = setup(9, after)
    fresh.acc:load_model(fresh.model, dir .. "/weights")
    mc.same_state(check, fresh.acc:get_state_dict(fresh.model), full, 0, what .. ": load_model gives the stages theirs")
    -- An asynchronous save writes the same checkpoint.
    run.acc:save_state(dir .. "/async", { async = true })
    run.acc:wait_for_checkpoint()
    local from_async = setup(9, after)
    from_async.acc:load_state(dir .. "/async")
    mc.same_state(check, from_async.acc:get_state_dict(from_async.model), full, 0,
                  what .. ": the asynchronous save's checkpoint loaded")
  end
  for _, resume in ipairs({ { "mid", 6 }, { "step4", 9 } }) do
    local again = setup(9, after)
    again.acc:load_state(dir .. "/" .. resume[1])
    local rest = train(again, resume[2])
    check.near(rest, { unpack(full_losses, #full_losses - #rest + 1) }, TOL,
               string.format("%s: the losses resumed from %s", what, resume[1]))
    check.equal(#rest, resume[1] == "mid" and 4 or 2, what .. ": updates left after " .. resume[1])
    mc.same_state(check, again.acc:get_state_dict(again.model), full, TOL,
                  string.format("%s: the weights resumed from %s", what, resume[1]))
  end
end

-- An nn.Sequential (its children's names, "1.weight" ...): 3 steps, saved,
-- a fresh one from other weights loads it, and both train 2 more alike;
-- get_state_dict holds the Sequential's own names, as one process's.
do
  local function sequential(seed)
    accel.set_seed(seed)
    local m = accel.nn.Sequential(accel.nn.Linear(4, 8), accel.nn.Tanh(), accel.nn.Linear(8, 4), accel.nn.Linear(4, 2))
    m.loss_fn = function(output, labels) return accel.nn.functional.mse_loss(output, labels) end
    return m
  end
  local function seq_run(seed)
    local acc = accel.Accelerator{
      parallelism_config = accel.ParallelismConfig{ pp_size = 2, pp_schedule = "1F1B", pp_microbatches = 4 } }
    local m = sequential(seed)
    local model, opt = acc:prepare(m, adamw(m:parameters()))
    return { acc = acc, model = model, opt = opt }
  end
  local function seq_train(run, first, last)
    for step = first, last do
      accel.set_seed(200 + step)
      local x, y = accel.randn({ 8, 4 }), accel.randn({ 8, 2 })
      run.acc:backward(run.model{ input = x, labels = y }.loss)
      run.opt:step()
      run.opt:zero_grad()
    end
  end
  local straight = seq_run(1)
  seq_train(straight, 1, 3)
  straight.acc:save_state(work .. "/sequential")
  seq_train(straight, 4, 5)
  local resumed = seq_run(9)
  resumed.acc:load_state(work .. "/sequential")
  seq_train(resumed, 4, 5)
  local expected = straight.acc:get_state_dict(straight.model)
  mc.same_state(check, resumed.acc:get_state_dict(resumed.model), expected, TOL, "a Sequential resumed at PP 2")
  local names = {}
  for name in pairs(sequential(1):state_dict()) do names[name] = true end
  for name in pairs(expected) do check.truthy(names[name], "a Sequential's get_state_dict names " .. name .. " as its own") end
  check.equal(#sorted_keys(expected), #sorted_keys(names), "a Sequential's get_state_dict holds every tensor")
end

-- A mesh's SHARDED_STATE_DICT checkpoint without a pipeline is refused.
do
  local tp_acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 },
    fsdp_plugin = accel.FullyShardedDataParallelPlugin{ state_dict_type = "SHARDED_STATE_DICT" } }
  local tp_model = accel.parallel.tensor_parallel(mc.build(1), tp_acc.mesh)
  tp_acc:prepare(tp_model, adamw(tp_model:parameters()))
  tp_acc:save_state(work .. "/tp2")
end
local pp = setup(1)
check.raises(function() pp.acc:load_state(work .. "/tp2") end, "a tp 2 SHARDED_STATE_DICT checkpoint under PP 2",
             "tp2", "SHARDED_STATE_DICT on a mesh without a pipeline")
-- Data parallel's checkpoint (no mesh, 2 ranks: the files one process
-- writes) loads at PP 2 with its weights; one whose optimizer steps fewer
-- parameters than the model has is refused, naming the file and counts.
do
  local ddp = accel.Accelerator{}
  local m = build(5)
  local ddp_model, ddp_opt = ddp:prepare(m, adamw(m:parameters()))
  local x = pipeline_check.batch(1):narrow(1, rank * 8 + 1, 8)
  ddp:backward(ddp_model{ input_ids = x, labels = x }.loss)
  ddp_opt:step()
  ddp:save_state(work .. "/ddp")
  local loaded = setup(9)
  loaded.acc:load_state(work .. "/ddp")
  mc.same_state(check, loaded.acc:get_state_dict(loaded.model), ddp_model:state_dict(), 0,
                "data parallel's checkpoint loaded at PP 2")
  local partial = accel.Accelerator{}
  local pm = build(5)
  local params = pm:parameters()
  table.remove(params, 1)
  partial:prepare(pm, adamw(params))
  partial:save_state(work .. "/partial")
  check.raises(function() setup(9).acc:load_state(work .. "/partial") end, "an optimizer of some parameters only",
               "optimizer.safetensors' steps " .. #params .. " parameter(s) but the model has " .. (#params + 1))
end

-- A pipeline's layout and files are data anyone could have written: rank 0
-- forges one file at a time (its size and checksum put in the manifest) and
-- every rank's load is refused naming the file and the field or tensor,
-- before anything changes.
do
  local read = dofile(here .. "helpers/read_file.lua")
  local serialize = require("accel.serialize")
  local folder = work .. "/before/step4"
  local function forged(name, content, try)
    acc0:wait_for_everyone()
    local saved = {}
    if rank == 0 then
      local manifest = ck.read_manifest(folder)
      saved["manifest.json"], saved[name] = read(folder .. "/manifest.json"), read(folder .. "/" .. name)
      local path = folder .. "/" .. name
      local digest = type(content) == "string" and ck.write_text(path, content) or ck.write_safetensors(path, content)
      for _, f in ipairs(manifest.files) do
        if f.name == name then f.size, f.crc32c = digest.size, digest.crc32c end
      end
      ck.write_manifest(folder, manifest)
    end
    acc0:wait_for_everyone()
    try()
    acc0:wait_for_everyone()
    if rank == 0 then
      for file, bytes in pairs(saved) do
        local f = assert(io.open(folder .. "/" .. file, "wb"))
        f:write(bytes)
        f:close()
      end
    end
    acc0:wait_for_everyone()
  end
  local target = setup(9)
  local function refused(name, content, what, ...)
    local words = { ... }
    forged(name, content, function()
      local weight = target.model:parameters()[1]:clone()
      check.raises(function() target.acc:load_state(folder) end, what, name, unpack(words))
      check.near(target.model:parameters()[1], weight, 0, what .. ": nothing was loaded")
    end)
  end
  local function layout_with(change)
    local value = serialize.load(read(folder .. "/mesh_layout.lua"), "mesh_layout.lua")
    change(value)
    return serialize.dump(value)
  end
  refused("mesh_layout.lua", layout_with(function(l) l.pipeline.stages[2] = nil end), "one writer for pp 2",
          "must list the 2 pp ranks' writers")
  refused("mesh_layout.lua", layout_with(function(l) l.world_size = 4 end), "another world size",
          "says world_size 4 but the checkpoint was saved on 2")
  refused("mesh_layout.lua", layout_with(function(l) l.pipeline.stages[2].rank = 5 end), "a writer that wrote nothing",
          "'rank' 5 is none of the 2 rank(s) saved on")
  refused("mesh_layout.lua", layout_with(function(l) l.pipeline.stages[1].layers = { "embed_tokens" } end),
          "layers not a list per model", "'layers[1]' must be a list of layer names")
  refused("mesh_layout.lua", layout_with(function(l) l.mesh.pp = "two" end), "a size not a number", "(mesh)", "pp")
  local rank1 = ck.read_safetensors(folder .. "/model_rank_1.safetensors")
  rank1["model.norm.weight"] = nil
  local pairs_out = {}
  for _, key in ipairs(sorted_keys(rank1)) do pairs_out[#pairs_out + 1] = { key, rank1[key] } end
  refused("model_rank_1.safetensors", pairs_out, "a stage's tensor missing", "missing keys: model.norm.weight")
end

-- What stays unbuilt under a pipeline is refused naming it.
check.raises(function() pp.acc:join_uneven_inputs({ pp.model }, function() end) end, "join_uneven_inputs",
             "join_uneven_inputs under pp_size = 2 is not implemented yet")

acc0:wait_for_everyone()
if rank == 0 then ck.remove_folder(work) end
check.done("test_pipeline_checkpoint_2ranks")
