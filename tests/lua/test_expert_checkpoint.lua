-- nproc: 2 4
-- Checkpoints under expert parallelism (docs/api/parallelism.md,
-- "Checkpoints of experts"): a tiny Mixtral (4 experts, top 2) whose
-- experts are split over ep 2, trained 6 AdamW steps of 2 micro-steps with
-- clipping, EP 2 (dp_shard 2) on 2 ranks and EP 2 x FSDP 4 on 4 (the experts
-- FSDP-sharded over the 2 ranks of dp_shard holding the same ones). Saved
-- mid-accumulation (after step 3's first micro-step: the summed gradients,
-- the experts' too, are saved) and after step 4, each loaded on the same
-- mesh by a fresh Accelerator on a model built from other weights: its
-- training then gives the uninterrupted run's losses and weights (1e-7);
-- an asynchronous save's checkpoint loads the same weights.
-- The files name experts as the whole model does, each expert's weights
-- and AdamW state written once, by the first rank holding it. The step-4
-- checkpoint loads on another layout and trains on to the same losses and
-- weights (1e-5: other float32 sums): without ep (data parallel over the
-- world, which holds the whole model as one process does; FSDP 4) and on
-- another ep size or mesh (EP 4 x FSDP 4, EP 2 x HSDP 2 x 2); a data-parallel checkpoint, and a
-- FULL_STATE_DICT one of FSDP 4, load under ep. Refused, naming the
-- layouts: save_state with SHARDED_STATE_DICT under ep, a SHARDED
-- checkpoint loaded under ep; a recipe's opt:state_dict() under ep still is.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local expert_check = dofile(here .. "helpers/expert_check.lua")
local ck = require("accel.core").formats

local tiny, batch, TINY, ROWS = expert_check.tiny, expert_check.batch, expert_check.TINY, expert_check.ROWS
local STEPS, ACCUMULATION, MAX_NORM, TOL, OTHER_LAYOUT_TOL = 6, 2, 0.5, 1e-7, 1e-5

local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local acc0 = accel.Accelerator{}
local work = acc0:gather_object(string.format("%s/expert_checkpoint_%d_%d", root, os.time(), math.random(1e9)))[1]
local world, rank = acc0.num_processes, acc0.process_index

-- A prepared run from a model of `seed`: o = {ep, dp_shard, dp_replicate,
-- state_dict_type}; with neither ep nor dp_shard, data parallel over the
-- world (no mesh).
local function setup(o, seed)
  local options = { gradient_accumulation_steps = ACCUMULATION }
  if o.ep or o.dp_shard then
    options.parallelism_config = accel.ParallelismConfig{ dp_shard_size = o.dp_shard, dp_replicate_size = o.dp_replicate,
                                                          ep_size = o.ep }
  end
  if o.state_dict_type then
    options.fsdp_plugin = accel.FullyShardedDataParallelPlugin{ state_dict_type = o.state_dict_type }
  end
  local acc = accel.Accelerator(options)
  local model = tiny(seed)
  if o.ep then model = accel.parallel.expert_parallel(model, acc.mesh) end
  local opt
  model, opt = acc:prepare(model, accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 }))
  local dp = acc.mesh and acc.mesh.dp or { rank = rank, size = world }
  return { acc = acc, model = model, opt = opt, dp = dp }
end

local function describe(o)
  if not (o.ep or o.dp_shard) then return "data parallel" end
  return string.format("dp_replicate %d x dp_shard %d x ep %d", o.dp_replicate or 1, o.dp_shard or 1, o.ep or 1)
end

-- Micro-steps `first` to the last (STEPS x ACCUMULATION, numbered from 1),
-- each on its slice of its step's batch (this dp rank's of the micro-step's
-- rows); after micro-step k runs hooks[k]. Returns each micro-step's loss,
-- averaged over dp.
local function train(run, first, hooks)
  local losses, rows = {}, ROWS / run.dp.size / ACCUMULATION
  for k = first, STEPS * ACCUMULATION do
    local step, micro = math.ceil(k / ACCUMULATION), (k - 1) % ACCUMULATION + 1
    local mine = batch(step):narrow(1, ((micro - 1) * run.dp.size + run.dp.rank) * rows + 1, rows)
    local loss
    run.acc:accumulate(run.model, function()
      local out = run.model{ input_ids = mine, labels = mine }
      run.acc:backward(out.loss)
      run.acc:clip_grad_norm(run.model:parameters(), MAX_NORM)
      run.opt:step()
      run.opt:zero_grad()
      loss = out.loss:detach():clone():view(1)
    end)
    losses[#losses + 1] = run.acc:reduce(loss, "mean"):item()
    if hooks and hooks[k] then hooks[k]() end
  end
  return losses
end

local function same_state(actual, expected, tol, what)
  local count = 0
  for name, t in pairs(expected) do
    check.truthy(actual[name] ~= nil, what .. ": " .. name .. " is there")
    check.near(actual[name], t, tol, what .. ": " .. name)
    count = count + 1
  end
  for _ in pairs(actual) do count = count - 1 end
  check.equal(count, 0, what .. ": the whole model's names, no more")
end

-- {name -> tensor} of the files `names` of `dir` that exist (by the
-- manifest), each name once: a name in two files fails.
local function union(dir, names)
  local listed = {}
  for _, f in ipairs(ck.read_manifest(dir).files) do listed[f.name] = true end
  local out, files = {}, 0
  for _, name in ipairs(names) do
    if listed[name] then
      files = files + 1
      local reader = ck.open_weights(dir .. "/" .. name)
      for _, key in ipairs(reader:names()) do
        check.truthy(out[key] == nil, string.format("'%s' is written once (again in %s)", key, name))
        out[key] = reader:load(key)
      end
      reader:close()
    end
  end
  return out, files
end

local EP = world == 2 and { ep = 2, dp_shard = 2 } or { ep = 2, dp_shard = 4 }
local what = describe(EP)

-- The uninterrupted run; micro-step 5 is step 3's first (gradients
-- pending), 8 step 4's last.
local run = setup(EP, 1)
local at_step4
local full_losses = train(run, 1, {
  [5] = function() run.acc:save_state(work .. "/mid") end,
  [8] = function()
    run.acc:save_state(work .. "/step4")
    at_step4 = run.acc:get_state_dict(run.model)
  end,
})
local final = run.acc:get_state_dict(run.model)

-- The files: the experts by the whole model's names, each once, by the
-- first rank holding it (ranks 0 and 1: the first of each ep group's place).
do
  local dir = work .. "/step4"
  local expert_files, optimizer_files = {}, {}
  for r = 0, world - 1 do
    expert_files[#expert_files + 1] = "model_experts_rank_" .. r .. ".safetensors"
    optimizer_files[#optimizer_files + 1] = "optimizer_experts_rank_" .. r .. ".safetensors"
  end
  local experts, writers = union(dir, expert_files)
  check.equal(writers, 2, what .. ": two ranks write experts, one per share")
  local dense = union(dir, { "model.safetensors" })
  local names = 0
  for name in pairs(experts) do
    check.truthy(name:match("%.block_sparse_moe%.experts%.%d+%.") ~= nil, what .. ": " .. name .. " is an expert's")
    check.truthy(dense[name] == nil, what .. ": " .. name .. " is not in model.safetensors")
    names = names + 1
  end
  check.equal(names, TINY.num_hidden_layers * TINY.num_local_experts * 3, what .. ": every expert's w1, w2, w3")
  for r = 0, 1 do
    local own = union(dir, { "model_experts_rank_" .. r .. ".safetensors" })
    check.truthy(own[string.format("model.layers.1.block_sparse_moe.experts.%d.w2.weight", 2 * r + 1)] ~= nil,
                 string.format("%s: rank %d writes its experts %d and %d by their global indices", what, r, 2 * r,
                               2 * r + 1))
  end
  local written = {}
  for name, t in pairs(dense) do written[name] = t end
  for name, t in pairs(experts) do written[name] = t end
  same_state(written, at_step4, 0, what .. ": the files hold get_state_dict's state")
  local state = union(dir, optimizer_files)
  local slots = 0
  for name in pairs(experts) do
    for _, slot in ipairs({ "exp_avg", "exp_avg_sq", "step" }) do
      check.truthy(state["state." .. name .. "." .. slot] ~= nil, what .. ": " .. name .. "'s " .. slot)
      slots = slots + 1
    end
  end
  local count = 0
  for _ in pairs(state) do count = count + 1 end
  check.equal(count, slots, what .. ": the experts' files hold their state and nothing else")
  local others = union(dir, { "optimizer.safetensors" })
  check.truthy(others["state.model.embed_tokens.weight.exp_avg"] ~= nil and others["param_groups.0.lr"] ~= nil,
               what .. ": optimizer.safetensors holds the other parameters' state by name and the hyperparameters")
end

-- The same mesh resumes exactly, mid-accumulation too.
for _, resume in ipairs({ { "mid", 6 }, { "step4", 9 } }) do
  local again = setup(EP, 9)
  again.acc:load_state(work .. "/" .. resume[1])
  local rest = train(again, resume[2])
  check.near(rest, { unpack(full_losses, resume[2]) }, TOL,
             string.format("%s: the losses resumed from %s", what, resume[1]))
  same_state(again.acc:get_state_dict(again.model), final, TOL,
             string.format("%s: the weights resumed from %s", what, resume[1]))
end

-- An asynchronous save writes the same checkpoint.
run.acc:save_state(work .. "/async", { async = true })
run.acc:wait_for_checkpoint()
local from_async = setup(EP, 9)
from_async.acc:load_state(work .. "/async")
same_state(from_async.acc:get_state_dict(from_async.model), final, 0, what .. ": the asynchronous save's checkpoint loaded")

-- Other layouts load the step-4 checkpoint and train on alike.
local function resume_on(o, dir, then_save)
  local again = setup(o, 9)
  again.acc:load_state(dir)
  if then_save then again.acc:save_state(then_save) end
  local rest = train(again, 9)
  local on = string.format("%s loaded on %s", dir:match("[^/]+$"), describe(o))
  check.near(rest, { unpack(full_losses, 9) }, OTHER_LAYOUT_TOL, on .. ": the losses")
  same_state(again.acc:get_state_dict(again.model), final, OTHER_LAYOUT_TOL, on .. ": the weights")
end
-- Data parallel holds the whole model, one process's optimizer: the
-- checkpoint it saves at once is one process's, which ep loads.
resume_on({}, work .. "/step4", work .. "/dp_step4")
resume_on(EP, work .. "/dp_step4")
if world == 4 then
  resume_on({ dp_shard = 4 }, work .. "/step4", work .. "/fsdp_step4")
  resume_on(EP, work .. "/fsdp_step4")
  resume_on({ ep = 4, dp_shard = 4 }, work .. "/step4")
  resume_on({ ep = 2, dp_shard = 2, dp_replicate = 2 }, work .. "/step4")
end

-- Refused, naming the layouts.
local sharded = setup({ dp_shard = world, ep = 2, state_dict_type = "SHARDED_STATE_DICT" }, 1)
check.raises(function() sharded.acc:save_state(work .. "/sharded") end, "SHARDED_STATE_DICT under ep",
             "save_state with SHARDED_STATE_DICT under ep_size = 2 is not implemented yet")
local flat = setup({ dp_shard = world, state_dict_type = "SHARDED_STATE_DICT" }, 1)
train(flat, 1, { [4] = function() flat.acc:save_state(work .. "/flat") end })
check.raises(function() sharded.acc:load_state(work .. "/flat") end, "a SHARDED checkpoint under ep",
             string.format("was saved on dp_replicate 1 x dp_shard %d x cp 1 x tp 1 x ep 1 and this Accelerator "
                           .. "runs on dp_replicate 1 x dp_shard %d x cp 1 x tp 1 x ep 2", world, world),
             "under ep_size > 1 load_state takes a checkpoint saved under ep")
check.raises(function() run.opt:state_dict() end, "a recipe's opt:state_dict() under ep",
             "the optimizer's state_dict under ep_size = 2 is not implemented yet",
             "save_state and load_state keep it, by parameter name")
check.done("expert checkpoint")
