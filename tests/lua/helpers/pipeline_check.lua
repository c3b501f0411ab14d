-- What the pipeline tests share (test_pipeline_runtime, test_pipeline_llama_2ranks,
-- test_pipeline_accelerator_2ranks, test_pipeline_dp_4ranks, test_pipeline_generate_2ranks,
-- test_pipeline_generate_4ranks,
-- test_pipeline_architectures_2ranks, test_pipeline_fsdp_4ranks,
-- test_pipeline_tp_4ranks, test_pipeline_tp_fsdp_8ranks, test_pipeline_stage_build_2ranks,
-- test_pipeline_stage_build_4ranks, test_pipeline_stage_build_8ranks).
local core = require("accel.core")
local model_stages = require("accel.parallel.pipeline.model_stages")

local pipeline_check = {}

-- fn(name, p, ref_p) for each parameter of `mine` beside the same-named one
-- of `theirs` (a module built alike).
function pipeline_check.each_pair(mine, theirs, fn)
  local ref = {}
  for name, p in theirs:named_parameters() do ref[name] = p end
  for name, p in mine:named_parameters() do fn(name, p, ref[name]) end
end

-- A small Llama (2 decoder layers: 5 pipeline layers), seeded: built alike everywhere.
pipeline_check.TINY = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
                        num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }

-- The model of config `base` (TINY by default) with `overrides`, from
-- `seed` (1 by default).
function pipeline_check.tiny(overrides, base, seed)
  local cfg = {}
  for k, v in pairs(base or pipeline_check.TINY) do cfg[k] = v end
  for k, v in pairs(overrides or {}) do cfg[k] = v end
  accel.set_seed(seed or 1)
  return accel.models.from_config(cfg):train()
end

-- Training through the Accelerator against one process: STEPS AdamW steps
-- (weight decay 0.01) with clipping to MAX_NORM on batches of ROWS rows of
-- T tokens; each step's batch is cut over the dp ranks and the
-- accumulation's micro-steps (equal slices, so one process's whole-batch
-- mean is the mean of theirs), each slice cut again into 4 micro-batches
-- by the schedule.
local STEPS, ROWS, T, MAX_NORM, LR = 10, 16, 8, 0.5, 1e-2
pipeline_check.STEPS, pipeline_check.ROWS, pipeline_check.T = STEPS, ROWS, T

-- ||a - b|| / ||b|| over every parameter of two models built alike.
function pipeline_check.relative_difference(a, b)
  local squares, norm = 0, 0
  pipeline_check.each_pair(a, b, function(_, mine, theirs)
    squares, norm = squares + (mine - theirs):pow(2):sum():item(), norm + theirs:pow(2):sum():item()
  end)
  return math.sqrt(squares / norm)
end

-- The number of elements of each of the whole model's parameters (TINY), by name.
function pipeline_check.numels()
  local out = {}
  for name, p in pipeline_check.tiny():named_parameters() do out[name] = p:numel() end
  return out
end

-- The pipelined model's stages hold tp slices over 2 ranks: each split
-- parameter half the whole model's (TINY's), the others whole.
function pipeline_check.holds_slices(check, model, what)
  local numel_of, split = pipeline_check.numels(), 0
  for _, entry in ipairs(require("accel.parallel.tp_parameters").list(model)) do
    local whole = numel_of[model.pipeline.names.stage[entry[1]]]
    check.equal(entry[2]:numel(), entry[3] and whole / 2 or whole, what .. ": " .. entry[1] .. "'s size here")
    if entry[3] then split = split + 1 end
  end
  check.truthy(split > 0, what .. ": the stages hold tp slices")
end

-- Under PP x TP 2 x FSDP 2 (dp_shard 2): the flat parameters hold this
-- rank's tp slices of its stages (half of each split parameter), the split
-- ones in flat parameters of their own, and each rank's shard is half of
-- each (up to padding).
function pipeline_check.holds_half_slices(check, acc, model, what)
  local flats = acc._models[1].sharded:flat_parameters(acc._optimizers[1].optimizer).flats
  local total, split = 0, 0
  for k, flat in ipairs(flats) do
    check.equal(flat.shard_numel, math.ceil(flat.numel / 2), string.format("%s: flat %d's shard is half", what, k))
    total = total + flat.numel
    if flat.split_over_tp then split = split + 1 end
  end
  check.truthy(split > 0 and split < #flats, what .. ": the split parameters are flat parameters of their own")
  local numel_of, slices = pipeline_check.numels(), 0
  for _, entry in ipairs(require("accel.parallel.tp_parameters").list(model)) do
    local whole = numel_of[model.pipeline.names.stage[entry[1]]]
    slices = slices + (entry[3] and whole / 2 or whole)
  end
  check.equal(total, slices, what .. ": the flat parameters hold this rank's tp slices of its stages")
end

-- llama's tp plan with lm_head's logits left split over the vocabulary
-- (the loss then vocab_parallel_cross_entropy's over tp).
function pipeline_check.vocab_parallel_plan()
  local plan = {}
  for k, v in pairs(require("accel.models.llama").tp_plan) do plan[k] = v end
  plan.lm_head = "colwise"
  return plan
end

-- Random tokens, or `learnable` rows (each counting up by a stride, modulo
-- the vocabulary), on which a loss can fall far in a few steps.
function pipeline_check.batch(step, learnable)
  accel.set_seed(100 + step)
  local V = pipeline_check.TINY.vocab_size
  if not learnable then return accel.randint(0, V, { ROWS, T }) end
  local start, stride = accel.randint(0, V, { ROWS, 1 }), accel.randint(1, 4, { ROWS, 1 })
  return (start + stride * accel.arange(0, T, { dtype = accel.int64 }):view(1, -1)) % V
end

local function adamw(model, lr)
  return accel.optim.AdamW(model:parameters(), { lr = lr or LR, weight_decay = 0.01 })
end

-- Runs fn under the Accelerator's autocast for `precision` (bf16: bfloat16
-- on the CPU; fp16 on the CPU scales the loss only, float32's numbers).
local function autocast(precision, fn)
  if precision == "bf16" then return core.amp.autocast(fn, "bfloat16", "cpu") end
  return fn()
end

-- One process: {losses, norms, model, ...} after STEPS steps; options
-- {precision = "bf16", lr = LR, learnable = false, base = a model's config
-- in place of TINY (its vocab_size TINY's), config = overrides of it,
-- build = a function returning the model in place of tiny's (in train
-- mode)}.
function pipeline_check.reference(check, options)
  local o = options or {}
  local precision = o.precision
  local model = o.build and o.build() or pipeline_check.tiny(o.config, o.base)
  local opt = adamw(model, o.lr)
  local losses, norms = {}, {}
  for step = 1, STEPS do
    local x = pipeline_check.batch(step, o.learnable)
    local loss = autocast(precision, function() return model{ input_ids = x, labels = x }.loss end):float()
    loss:backward()
    norms[step] = core.clip_grad_norm(model:parameters(), MAX_NORM):item()
    if step == 1 then check.truthy(norms[1] > MAX_NORM, "the reference's first norm exceeds max_norm (clipping acts)") end
    opt:step()
    opt:zero_grad()
    losses[step] = loss:item()
  end
  return { losses = losses, norms = norms, model = model, lr = o.lr, learnable = o.learnable, config = o.config,
           base = o.base }
end

-- The same through Accelerator{parallelism_config = pp_size o.pp x dp_replicate
-- o.dp x dp_shard o.dp_shard x tp_size o.tp}: o = {schedule, pp = 2, virtual_stages = 1,
-- dp = 1, dp_shard = 1 (> 1: FSDP on each stage), tp = 1 (> 1: the model
-- made tensor parallel before prepare, by `plan` or its own tp_plan), fsdp_plugin,
-- accumulation = 1, mixed_precision, tolerances = {loss, norm, weights}
-- (default 1e-5), save = {dir, step} (acc:save_state(dir) after that
-- step), resume = {dir, step} (a model from another seed loads dir and
-- trains the steps after), build = function(acc) returning the model in
-- place of tiny's (acc:build_model's)}. Each step's loss (out.loss averaged over the
-- micro-steps and mesh.dp) and the norm acc:clip_grad_norm returns equal
-- the reference's, and after training every weight this rank's stages
-- hold (under FSDP or TP: every weight of the whole model, acc:get_state_dict,
-- the stages gathered). Returns acc, the pipelined model and the model it
-- was cut from.
function pipeline_check.train(check, ref, o)
  local accumulation, replicas, shards, pp = o.accumulation or 1, o.dp or 1, o.dp_shard or 1, o.pp or 2
  local tp = o.tp or 1
  local dp = replicas * shards
  local tol = o.tolerances or { loss = 1e-5, norm = 1e-5, weights = 1e-5 }
  local what = string.format("%s %s (v %d) at pp %d x dp %d%s%s%s, accumulation %d%s%s%s", ref.model.config.model_type,
                             o.schedule, o.virtual_stages or 1, pp, replicas,
                             shards > 1 and (" x dp_shard " .. shards) or "", tp > 1 and (" x tp " .. tp) or "",
                             o.plan and " (own plan)" or "", accumulation,
                             o.mixed_precision and (", " .. o.mixed_precision) or "",
                             ref.config and ref.config.tie_word_embeddings and ", tied" or "",
                             o.resume and (", resumed after step " .. o.resume.step) or "")
  local acc = accel.Accelerator{ gradient_accumulation_steps = accumulation, mixed_precision = o.mixed_precision,
    fsdp_plugin = o.fsdp_plugin,
    parallelism_config = accel.ParallelismConfig{ pp_size = pp, dp_replicate_size = replicas, dp_shard_size = shards,
                                                  tp_size = tp, pp_schedule = o.schedule, pp_microbatches = 4,
                                                  pp_virtual_stages = o.virtual_stages } }
  local mesh = acc.mesh
  local base = o.build and o.build(acc) or pipeline_check.tiny(ref.config, ref.base, o.resume and 9)
  if tp > 1 then base = accel.parallel.tensor_parallel(base, mesh, o.plan) end
  local numel_of = {}  -- by whole name, tp slices as this rank holds them
  for name, p in base:named_parameters() do numel_of[name] = p:numel() end
  local model, opt = acc:prepare(base, adamw(base, ref.lr))
  if o.resume then acc:load_state(o.resume[1]) end
  check.truthy(model ~= base, what .. ": prepare returns the pipelined model")
  local whole = #base:parameters()
  check.truthy(#model:parameters() > 0 and #model:parameters() < whole,
               string.format("%s: the rank's stages hold %d of the model's %d parameters", what, #model:parameters(),
                             whole))
  -- The optimizer, made over the whole model, steps this rank's stages
  -- only (their flat shards under FSDP): no other stage's weight is held.
  local stepped, stage_numel = 0, 0
  for g = 1, opt.optimizer:num_param_groups() do
    for _, p in ipairs(opt.optimizer:params(g)) do stepped = stepped + p:numel() end
  end
  local is_parameter = {}
  for _, name in ipairs(model.pipeline.names.parameters) do is_parameter[name] = true end
  for _, name in pairs(model.pipeline.names.stage) do
    if is_parameter[name] then stage_numel = stage_numel + numel_of[name] end
  end
  local expected = shards > 1 and stage_numel / shards or stage_numel
  check.truthy(stepped >= expected and stepped <= expected + 64 * #model:parameters(),
               string.format("%s: the optimizer holds this rank's stages' %d elements (%d over FSDP's shards), got %d",
                             what, stage_numel, expected, stepped))
  local rows = ROWS / dp / accumulation
  for step = o.resume and o.resume.step + 1 or 1, STEPS do
    local batch = pipeline_check.batch(step, ref.learnable)
    local summed, norm = 0, nil
    for micro = 1, accumulation do
      local x = batch:narrow(1, ((micro - 1) * dp + mesh.dp.rank) * rows + 1, rows)
      acc:accumulate(model, function()
        local out = model{ input_ids = x, labels = x }
        acc:backward(out.loss)
        local n = acc:clip_grad_norm(model:parameters(), MAX_NORM)
        check.equal(n ~= nil, micro == accumulation, what .. ": clipping acts on the synchronised micro-step only")
        norm = n or norm
        opt:step()
        opt:zero_grad()
        local loss = out.loss:clone():view(1)
        mesh.dp:all_reduce(loss, "mean")
        summed = summed + loss:item()
      end)
    end
    check.near(summed / accumulation, ref.losses[step], tol.loss, string.format("%s: step %d's loss on rank %d", what,
                                                                                step, acc.process_index))
    check.near(norm, ref.norms[step], tol.norm, string.format("%s: step %d's gradient norm", what, step))
    if o.save and o.save.step == step then acc:save_state(o.save[1]) end
  end
  -- Within tolerances (mixed precision), the weights are compared as a whole
  -- (||W - W_ref|| / ||W_ref|| over this rank's stages): AdamW's sign-like
  -- steps on near-zero gradients turn bf16's rounding into large
  -- differences of single weights, in one process alone too
  -- (tensor_parallel_check.lua).
  if shards > 1 or tp > 1 then
    -- The shards or tp slices hold the weights: gathered, by the whole model's names.
    local full, theirs = acc:get_state_dict(model), ref.model:state_dict()
    for name, t in pairs(theirs) do
      check.near(full[name], t, tol.weights, string.format("%s: %s after %d steps", what, name, STEPS))
    end
    return acc, model, base
  end
  local diff, norm = 0, 0
  local cut = model_stages.cut(base)
  for _, name in ipairs(model:layer_names()) do
    pipeline_check.each_pair(cut.module(base, name), cut.module(ref.model, name),
      function(p, mine, theirs)
        if o.tolerances then
          diff = diff + (mine - theirs):pow(2):sum():item()
          norm = norm + theirs:pow(2):sum():item()
        else
          check.near(mine, theirs, tol.weights, string.format("%s: %s.%s after %d steps", what, name, p, STEPS))
        end
      end)
  end
  if o.tolerances then
    local relative = math.sqrt(diff / norm)
    check.truthy(relative <= tol.weights, string.format("%s: the weights of rank %d's stages differ by %.3g relative "
                                                        .. "(tolerance %g)", what, acc.process_index, relative,
                                                        tol.weights))
  end
  return acc, model, base
end

-- An fp16 overflow on one rank alone: two steps of `acc` (mixed_precision
-- fp16) on rows `ids`; at the second, rank `overflowing`'s `holder` (a
-- tensor whose .grad this rank's stages hold: a parameter, or a shard
-- under FSDP) takes an inf; every rank skips that step (its holder does
-- not move) and halves the loss scale.
function pipeline_check.overflow_skips(check, acc, model, opt, holder, ids, overflowing, what)
  local rank = acc.process_index
  for step = 1, 2 do
    acc:backward(model{ input_ids = ids, labels = ids }.loss)
    if step == 2 and rank == overflowing then holder.grad:view(-1)[1] = math.huge end
    local before = holder:clone()
    acc:clip_grad_norm(model:parameters(), 1.0)
    opt:step()
    opt:zero_grad()
    local moved = (holder - before):abs():max():item() > 0
    check.equal(opt.step_was_skipped, step == 2, string.format("%s: step %d skipped on rank %d", what, step, rank))
    check.equal(moved, step == 1, string.format("%s: rank %d's stage moved at step %d", what, rank, step))
    check.equal(acc:loss_scale(), step == 2 and 32768 or 65536, string.format("%s: the scale after step %d", what, step))
  end
end

-- Micro-steps of a checkpoint test's run {acc, model, opt}: `steps` steps
-- of `accumulation` micro-steps on batch(step), each cut over mesh.dp and
-- the micro-steps, from micro-step number `first`, clipping to `max_norm`;
-- hooks[k] runs after the k-th. Returns the synchronised micro-steps'
-- losses (averaged over dp).
function pipeline_check.micro_steps(run, o, first, hooks)
  local losses, k, mesh = {}, 0, run.acc.mesh
  local rows = ROWS / mesh.dp.size / o.accumulation
  for step = 1, o.steps do
    local batch = pipeline_check.batch(step)
    for micro = 1, o.accumulation do
      k = k + 1
      if k >= first then
        local x = batch:narrow(1, ((micro - 1) * mesh.dp.size + mesh.dp.rank) * rows + 1, rows)
        run.acc:accumulate(run.model, function()
          local out = run.model{ input_ids = x, labels = x }
          run.acc:backward(out.loss)
          run.acc:clip_grad_norm(run.model:parameters(), o.max_norm)
          run.opt:step()
          run.opt:zero_grad()
          if micro == o.accumulation then
            local loss = out.loss:clone():view(1)
            mesh.dp:all_reduce(loss, "mean")
            losses[#losses + 1] = loss:item()
          end
        end)
        if hooks and hooks[k] then hooks[k]() end
      end
    end
  end
  return losses
end

-- A checkpoint test's runs: for each of o.savings, {sizes, folder name,
-- resumes}, a run o.setup(1, sizes) trains by o.schedule (micro_steps),
-- saving <o.folder>/<folder name>/mid after micro-step 5 (mid-accumulation
-- at 2 micro-steps a step) and .../step4 after micro-step 8
-- (o.after_save(run, sizes, dir) then, if given); for each resume
-- {checkpoint, first micro-step, sizes} a run o.setup(9, sizes) (other
-- weights) loads that checkpoint and trains on to the uninterrupted run's
-- losses and final weights (get_state_dict), within o.tol on the sizes
-- saved on, 1e-5 on others (they sum the gradients in another order).
-- o.names[sizes] names them in messages.
function pipeline_check.save_and_resume(check, o)
  for _, saving in ipairs(o.savings) do
    local sizes, dir = saving[1], o.folder .. "/" .. saving[2]
    local run = o.setup(1, sizes)
    local losses = pipeline_check.micro_steps(run, o.schedule, 1, {
      [5] = function() run.acc:save_state(dir .. "/mid") end,
      [8] = function()
        run.acc:save_state(dir .. "/step4")
        if o.after_save then o.after_save(run, sizes, dir .. "/step4") end
      end })
    local final = run.acc:get_state_dict(run.model)
    for _, resume in ipairs(saving[3]) do
      local what = string.format("%s's checkpoint at %s loaded at %s", o.names[sizes], resume[1], o.names[resume[3]])
      local again = o.setup(9, resume[3])
      again.acc:load_state(dir .. "/" .. resume[1])
      local rest = pipeline_check.micro_steps(again, o.schedule, resume[2])
      local tol = resume[3] == sizes and o.tol or 1e-5
      check.near(rest, { unpack(losses, #losses - #rest + 1) }, tol, what .. ": the losses")
      local state = again.acc:get_state_dict(again.model)
      for name, t in pairs(final) do check.near(state[name], t, tol, what .. ": the weights: " .. name) end
    end
  end
end

return pipeline_check
