-- nproc: 1 2
-- Gradient checkpointing under every way accel synchronises gradients, on
-- the ranks the test runs on: a 12-layer Llama (accel.models.from_config)
-- with attention dropout on trains 4 micro-steps with and without
-- model:gradient_checkpointing_enable(), side by side on the same batches
-- and dropout seeds, under plain data parallel (through acc:backward and
-- through a plain loss:backward()), accumulation over 2 micro-steps
-- (acc:accumulate, and acc:no_sync by hand), ZeRO stages 1-3 and FSDP
-- FULL_SHARD by decoder layer. Gradients where a rank holds them whole
-- (else the norms clipping sees over every rank's slices) and the weights
-- after equal within 1e-6. On several ranks the reducer also saw each
-- parameter's gradient once per backward, and FSDP gathered no unit more
-- often with checkpoints than without. Run at 1 and 2 ranks.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")
local dist = core.dist
local config = {
  model_type = "llama", vocab_size = 64, hidden_size = 32, intermediate_size = 48, num_hidden_layers = 12,
  num_attention_heads = 4, num_key_value_heads = 2, max_position_embeddings = 32, attention_dropout = 0.2,
}
local updates, micro_steps, B, T = 2, 2, 2, 8

local variants = {
  { name = "plain data parallel", options = {}, whole = true },
  -- A recipe's own loss:backward() on a prepared model: the reducer ends
  -- the pass itself, when autograd's pass ends (gradient_sync.h).
  { name = "loss:backward()", options = {}, whole = true, plain_backward = true },
  -- The whole model checkpointed too: every gradient comes from inside a
  -- checkpoint.
  { name = "loss:backward() through nested checkpoints", options = {}, whole = true, plain_backward = true,
    nested = true },
  -- Only the layers trained: the first gradient, and every one, comes from
  -- a recomputed layer, each in a pass of its own were the layers
  -- recomputed by nested backward passes (the reentrant way).
  { name = "loss:backward(), embeddings and head frozen", options = {}, whole = true, plain_backward = true,
    frozen = true },
  { name = "accumulate", options = { gradient_accumulation_steps = micro_steps }, whole = true },
  { name = "no_sync", options = {}, whole = true, no_sync = true },
  { name = "zero_stage 1", options = { zero_stage = 1 } },
  { name = "zero_stage 2", options = { zero_stage = 2 } },
  { name = "zero_stage 3", options = { zero_stage = 3 } },
  { name = "FSDP FULL_SHARD by layer", counts_gathers = true, options = {
      fsdp_plugin = accel.FullyShardedDataParallelPlugin{
        sharding_strategy = "FULL_SHARD", transformer_layer_cls = "LlamaDecoderLayer" } } },
}

local function make(variant, checkpointed)
  local acc = accel.Accelerator(variant.options)
  accel.set_seed(11)
  local model = accel.models.from_config(config)
  if variant.frozen then
    for _, p in ipairs({ model.model.embed_tokens.weight, model.model.norm.weight, model.lm_head.weight }) do
      p:requires_grad_(false)
    end
  end
  if checkpointed then model:gradient_checkpointing_enable() end
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.01 })
  model, opt = acc:prepare(model, opt)
  return { acc = acc, model = model, opt = opt, norms = {}, grads = {}, gathers = {}, checkpointed = checkpointed }
end

local rank, world
-- Each parameter's gradient reported once by the last synchronised backward.
local function check_reported_once(run, what)
  local reducer = run.acc._models[1].sync
  if world == 1 or not reducer.last_events then return end
  local seen, n = {}, 0
  for _, event in ipairs(reducer:last_events()) do
    if event[1] == "gradient" then
      check.equal(seen[event[2]], nil, what .. ": parameter " .. event[2] .. " reported once")
      seen[event[2]], n = true, n + 1
    end
  end
  check.equal(n, #run.model:parameters(), what .. ": every parameter reported")
end

local function micro_step(run, variant, ids, seed, micro)
  local acc, model = run.acc, run.model
  local gathers = dist.counts().all_gather
  local function forward_backward()
    accel.set_seed(seed, { device_specific = true })
    -- The nested variant counts the whole model's recomputation with the
    -- logits' loss: with the chunked loss (the default in training) the
    -- gradients are the same but LibTorch counts one recomputation fewer.
    local inputs = { input_ids = ids, labels = ids }
    if variant.nested then inputs.skip_logits = false end
    local loss = (variant.nested and run.checkpointed and accel.checkpoint(model, inputs) or model(inputs)).loss
    if variant.no_sync then loss = loss / micro_steps end
    if variant.plain_backward then
      loss:backward()
    else
      acc:backward(loss)
    end
  end
  acc:accumulate(model, function()
    if variant.no_sync and micro % micro_steps ~= 0 then
      acc:no_sync(model, forward_backward)
      return
    end
    forward_backward()
    if not acc.sync_gradients then return end
    if variant.whole then
      local grads = {}
      for name, p in model:named_parameters() do grads[name] = p.grad:clone() end
      run.grads[#run.grads + 1] = grads
      if not variant.options.gradient_accumulation_steps then check_reported_once(run, variant.name) end
    end
    run.norms[#run.norms + 1] = acc:clip_grad_norm(model:parameters(), 1e9):item()
    run.opt:step()
    run.opt:zero_grad()
  end)
  run.gathers[#run.gathers + 1] = dist.counts().all_gather - gathers
end

for _, variant in ipairs(variants) do
  local plain, checkpointed = make(variant, false), make(variant, true)
  rank, world = plain.acc.process_index, plain.acc.num_processes
  accel.set_seed(3)
  local data = accel.randint(0, config.vocab_size, { updates * micro_steps * world, B, T })
  local before = core.autograd.recomputations().total
  for micro = 1, updates * micro_steps do
    local ids = data[(micro - 1) * world + rank + 1]
    for _, run in ipairs({ plain, checkpointed }) do micro_step(run, variant, ids, 1000 + micro, micro) end
  end
  local what = variant.name
  check.equal(core.autograd.recomputations().total - before,
              updates * micro_steps * (config.num_hidden_layers + (variant.nested and 1 or 0)),
              what .. ": every checkpoint recomputed in every backward")
  local accumulates = variant.options.gradient_accumulation_steps or variant.no_sync
  check.equal(#checkpointed.norms, accumulates and updates or updates * micro_steps, what .. ": every update stepped")
  check.near(checkpointed.norms, plain.norms, 1e-6, what .. ": gradient norms")
  for step, grads in ipairs(plain.grads) do
    for name, g in pairs(grads) do
      check.near(checkpointed.grads[step][name], g, 1e-6, what .. ": update " .. step .. " gradient of " .. name)
    end
  end
  if variant.counts_gathers then
    check.near(checkpointed.gathers, plain.gathers, 0, what .. ": all-gathers per micro-step")
    if world > 1 then check.truthy(plain.gathers[1] > 0, what .. ": units are gathered") end
  end
  local expected = plain.acc:get_state_dict(plain.model)
  local got = checkpointed.acc:get_state_dict(checkpointed.model)
  for name, t in pairs(expected) do check.near(got[name], t, 1e-6, what .. ": weight " .. name) end
end
check.done(check.run_name("test_checkpoint_activations_sync"))
