-- nproc: 2
-- LoRA training under acc:prepare on two processes equals one process's
-- within float32 rounding, under plain data parallel, ZeRO 1 and 2, and
-- FSDP FULL_SHARD by decoder layer (also with the model built empty on
-- rank 1, as cpu_ram_efficient_loading does). And the frozen base costs
-- nothing there: the gradient reducer sees only the adapters, the shards
-- and the optimizer's state hold only their elements, and no frozen weight
-- takes a gradient. The sharded model's adapter saves through
-- acc:get_state_dict (and, without it, refuses to write empty tensors);
-- every rank loads what the main process saved.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local peft = accel.peft

local tiny = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 2, num_key_value_heads = 1 }
local STEPS = 4

-- The same model on every rank: a seeded base, adapters on q, v and up
-- projections with lora_B random (at zero, lora_A's first gradient would be
-- zero and prove less).
local function build()
  accel.set_seed(1)
  local model = peft.get_peft_model(accel.models.from_config(tiny), peft.LoraConfig{
    r = 4, lora_alpha = 8, target_modules = { "q_proj", "v_proj", "up_proj" } })
  accel.no_grad(function()
    for name, p in model:named_parameters() do
      if name:find("lora_B") then p:normal_(0, 0.1) end
    end
  end)
  return model:train()
end

accel.set_seed(2)
local batch = accel.randint(3, 32, { 4, 8 })  -- every row's 8 labels count: each rank's mean is half the batch's

-- One process on the whole batch: the reference.
local alone = build()
local alone_opt = accel.optim.AdamW(alone:parameters(), { lr = 1e-2 })
for _ = 1, STEPS do
  alone{ input_ids = batch, labels = batch }.loss:backward()
  alone_opt:step()
  alone_opt:zero_grad()
end
local expected = alone:state_dict()
local trainable = alone:get_nb_trainable_parameters()
check.equal(trainable, 2 * (4 * 16 + 16 * 4 + 4 * 16 + 8 * 4 + 4 * 16 + 32 * 4), "the adapters' elements")

local function numel_of(list)
  local n = 0
  for _, t in ipairs(list) do n = n + t:numel() end
  return n
end

local function train(what, options, empty_on_others)
  local acc = accel.Accelerator(options)
  local rank = acc.process_index
  local model = empty_on_others and acc:build_model(build) or build()
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
  model, opt = acc:prepare(model, opt)
  local rows = batch:narrow(1, 2 * rank + 1, 2)
  for step = 1, STEPS do
    acc:backward(model{ input_ids = rows, labels = rows }.loss)
    if step == 1 then
      for name, t in pairs(model:state_dict()) do
        if not name:find("lora_") and t.grad ~= nil then
          check.truthy(false, what .. ": frozen " .. name .. " took a gradient")
        end
      end
    end
    opt:step()
    opt:zero_grad()
  end
  local entry = acc._models[1]
  local state_numel = 0
  for key, t in pairs(opt.optimizer:state_dict()) do
    if key:match("%.exp_avg$") then state_numel = state_numel + t:numel() end
  end
  if entry.sharded then
    local shard_numel = numel_of(entry.sharded:shards())
    check.truthy(shard_numel * 2 >= trainable and shard_numel * 2 < trainable + 2 * 16,
                 string.format("%s: the shards hold the adapters' %d elements, split in two (%d here)", what,
                               trainable, shard_numel))
    check.equal(state_numel, shard_numel, what .. ": the optimizer keeps state for this rank's shard only")
  else
    local gradients = 0
    for _, event in ipairs(entry.sync:last_events()) do
      if event[1] == "gradient" then gradients = gradients + 1 end
    end
    check.equal(gradients, #model:parameters(), what .. ": the reducer's buckets hold the 12 adapters alone")
    check.equal(#model:parameters(), 12, what .. ": the prepared model's parameters are its adapters")
    check.equal(state_numel, trainable, what .. ": the optimizer keeps state for the adapters only")
  end
  local got = acc:get_state_dict(model)
  local worst = 0
  for name, t in pairs(expected) do
    worst = math.max(worst, (got[name] - t):abs():max():item())
  end
  check.near(worst, 0, 1e-6, what .. ": the weights equal one process's (max abs diff " .. worst .. ")")
  return acc, model
end

train("plain data parallel", {})
train("ZeRO 1", { zero_stage = 1 })
train("ZeRO 2", { zero_stage = 2 })
train("FSDP FULL_SHARD", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
  sharding_strategy = "FULL_SHARD", transformer_layer_cls = "LlamaDecoderLayer" } })
local acc, model = train("FSDP FULL_SHARD built empty on rank 1", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
  sharding_strategy = "FULL_SHARD", transformer_layer_cls = "LlamaDecoderLayer",
  cpu_ram_efficient_loading = true } }, true)

-- The main process saves the sharded model's adapter, gathered on every
-- rank as Accelerate's docs do it; every rank loads it.
local name = os.tmpname()
os.remove(name)
local folder = acc:gather_object(name .. "-adapter")[1]
check.raises(function() acc:unwrap_model(model):save_pretrained(folder .. "-empty") end,
             "saving sharded parameters as they are", "holds no elements on this rank",
             "state_dict = acc:get_state_dict(model)")
acc:unwrap_model(model):save_pretrained(folder, { is_main_process = acc.is_main_process,
                                                 state_dict = acc:get_state_dict(model) })
acc:wait_for_everyone()
accel.set_seed(1)
local loaded = peft.from_pretrained(accel.models.from_config(tiny), folder)
local ids = batch:narrow(1, 1, 2)
local d = accel.no_grad(function()
  return (loaded{ input_ids = ids }.logits - alone:eval(){ input_ids = ids }.logits):abs():max():item()
end)
check.near(d, 0, 1e-5, "every rank loads the main process's adapter with one process's outputs")
acc:wait_for_everyone()
if acc.is_main_process then require("accel.core").formats.remove_folder(folder) end
check.done("test_peft_2ranks")
