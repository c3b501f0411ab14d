-- nproc: 2
-- QLoRA under FSDP FULL_SHARD on two processes: a tiny Llama loaded in 4
-- bits (nf4, double quantization), prepare_model_for_kbit_training and
-- LoRA adapters on every projection, trained 10 AdamW steps on half the
-- batch per rank, gives one process's losses and adapter weights within the
-- tolerances measured here (printed), over the world and over a mesh's
-- dp_shard. Each rank holds half of every Linear4bit's codes and absmax
-- (asserted in bytes), gathered for each forward and backward; the gathered state dict and acc:save_model's
-- folder hold the one-process 4-bit tensors byte for byte, save_pretrained
-- writes the adapter within the tolerance, and save_state round trips
-- (FULL_STATE_DICT and SHARDED_STATE_DICT) give back the same losses.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local peft = accel.peft
local core = require("accel.core")

local tiny = { model_type = "llama", vocab_size = 32, hidden_size = 64, intermediate_size = 128,
               num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
local STEPS = 10
local LOSS_TOLERANCE, WEIGHT_TOLERANCE = 1e-5, 1e-5

-- One float checkpoint, written by the main process, loaded in 4 bits by every model below.
local setup = accel.Accelerator{}
local name = os.tmpname()
os.remove(name)
local folder = setup:gather_object(name .. "-float")[1]
if setup.is_main_process then
  accel.set_seed(1)
  accel.models.from_config(tiny):save_pretrained(folder)
end
setup:wait_for_everyone()

local function build()
  local base = accel.models.from_pretrained(folder, { quantization_config = accel.BitsAndBytesConfig{
    load_in_4bit = true, bnb_4bit_quant_type = "nf4", bnb_4bit_use_double_quant = true } })
  base = peft.prepare_model_for_kbit_training(base)
  accel.set_seed(3)
  local model = peft.get_peft_model(base, peft.LoraConfig{ r = 4, lora_alpha = 8, target_modules = {
    "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj" } })
  accel.no_grad(function()
    for n, p in model:named_parameters() do
      if n:find("lora_B") then p:normal_(0, 0.1) end
    end
  end)
  return model:train()
end

-- The codes and absmax each Linear4bit holds here, in bytes.
local function four_bit_bytes(model)
  local bytes, layers = 0, 0
  for _, m in ipairs(model:modules()) do
    if m.__name == "Linear4bit" then
      local w = m:quantized_weight()
      bytes, layers = bytes + w.weight:numel() * w.weight:element_size() + w.absmax:numel() * w.absmax:element_size(),
        layers + 1
    end
  end
  return bytes, layers
end

accel.set_seed(2)
local batch = accel.randint(0, 32, { 4, 12 })  -- every row's labels count: each rank's mean is half the batch's

local alone = build()
local whole_bytes, layers = four_bit_bytes(alone)
check.equal(layers, 14, "2 layers x 7 projections in 4 bits")
local alone_opt = accel.optim.AdamW(alone:parameters(), { lr = 1e-2 })
local expected = {}
for step = 1, STEPS do
  local loss = alone{ input_ids = batch, labels = batch }.loss
  loss:backward()
  alone_opt:step()
  alone_opt:zero_grad()
  expected[step] = loss:item()
end
local alone_state = alone:state_dict()

-- Shards of weights whose blocks do not split evenly (3 blocks, the last
-- one partial; bfloat16 storage, nested statistics) gather back whole, and
-- a product from a shard is the whole weight's, forward and backward.
local group = core.dist.new_group("test.four_bit", { 0, 1 })
for _, case in ipairs({ { { 3, 50 }, {} }, { { 3, 40 }, { quant_storage = "bfloat16", double_quant = true } } }) do
  accel.set_seed(5)
  local w = core.quant.quantize_4bit(accel.randn(case[1]), case[2])
  local shard = core.quant.shard_4bit(w, group)
  local whole = core.quant.gather_4bit(shard, group)
  local what = string.format("a %dx%d weight", case[1][1], case[1][2])
  check.truthy(whole.weight.dtype == w.weight.dtype and whole.weight:eq(w.weight):all():item()
               and whole.absmax:eq(w.absmax):all():item(), what .. ": the shards gather to the whole codes and absmax")
  check.equal(shard.absmax:numel(), 2 - (case[1][2] == 40 and 1 or 0), what .. ": whole blocks on each rank")
  local x1 = accel.randn(4, case[1][2]):requires_grad_()
  local x2 = x1:detach():clone():requires_grad_()
  local y1 = core.quant.linear_4bit(x1, w, nil, "float32")
  local y2 = core.quant.linear_4bit(x2, shard, nil, "float32", group)
  check.near(y2, y1, 0, what .. ": the sharded product is the whole weight's")
  y1:sum():backward()
  y2:sum():backward()
  check.near(x2.grad, x1.grad, 0, what .. ": and so is its input gradient")
end
check.raises(function() core.quant.linear_4bit(accel.randn(2, 50), core.quant.quantize_4bit(accel.randn(3, 50)), nil,
                                               "float32", group) end, "a whole weight given as a shard",
             "the 4-bit weight's shard", "uint8 bytes")

-- Trains a fresh model under `options` (FSDP FULL_SHARD, over the world or
-- a mesh's dp_shard) on this rank's half of the batch: each step's loss
-- against one process's, the bytes held checked. Returns the Accelerator,
-- the prepared model, the bytes held, a function that runs one more step
-- and the largest loss difference.
local by_layer = accel.FullyShardedDataParallelPlugin{ sharding_strategy = "FULL_SHARD",
                                                       transformer_layer_cls = "LlamaDecoderLayer" }
local function train(what, options)
  local acc = accel.Accelerator(options)
  local rank = acc.process_index
  local model = build()
  local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
  model, opt = acc:prepare(model, opt)
  local mine = four_bit_bytes(acc:unwrap_model(model))
  check.equal(mine * 2, whole_bytes, string.format("%s: rank %d holds half of the 4-bit codes and absmax (%d of %d "
                                                   .. "bytes)", what, rank, mine, whole_bytes))
  local q_proj = acc:unwrap_model(model).base_model.model.model.layers[1].self_attn.q_proj.base_layer
  check.truthy(tostring(q_proj):find("storage sharded over 2", 1, true) ~= nil,
               what .. ": q_proj says its storage is sharded")
  check.raises(function() q_proj:shard_storage_(q_proj:storage_group()) end, "sharding twice", "sharded already")
  check.raises(function() q_proj:dequantized_weight() end, "decoding a shard", "sharded over 2 ranks")
  local rows = batch:narrow(1, 2 * rank + 1, 2)
  local function step_loss()
    local loss = model{ input_ids = rows, labels = rows }.loss
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
    return acc:reduce(loss:detach(), "mean"):item()
  end
  local worst_loss = 0
  for step = 1, STEPS do
    local got = step_loss()
    worst_loss = math.max(worst_loss, math.abs(got - expected[step]))
    check.truthy(math.abs(got - expected[step]) <= LOSS_TOLERANCE, string.format(
      "%s, step %d: the sharded QLoRA loss %.7f equals one process's %.7f", what, step, got, expected[step]))
  end
  check.equal(four_bit_bytes(acc:unwrap_model(model)), mine, what .. ": training leaves the 4-bit storage sharded")
  return acc, model, mine, step_loss, worst_loss
end

-- Over a mesh's dp_shard: the same losses and adapters.
local acc, model = train("FSDP over the mesh's dp_shard", { fsdp_plugin = by_layer,
  parallelism_config = accel.ParallelismConfig{ dp_shard_size = 2 } })
local mesh_state = acc:get_state_dict(model)
local mesh_worst = 0
for key, t in pairs(alone_state) do
  if key:find("lora_", 1, true) then mesh_worst = math.max(mesh_worst, (mesh_state[key] - t):abs():max():item()) end
end
check.truthy(mesh_worst <= WEIGHT_TOLERANCE, string.format("over the mesh: the adapters equal one process's within "
                                                           .. "%g: %.3g", WEIGHT_TOLERANCE, mesh_worst))

local mine, step_loss, worst_loss
acc, model, mine, step_loss, worst_loss = train("FSDP over the world", { fsdp_plugin = by_layer })
local rank = acc.process_index

-- The gathered state dict: the 4-bit tensors byte for byte, the adapters within the tolerance.
local full = acc:get_state_dict(model)
check.equal(four_bit_bytes(acc:unwrap_model(model)), mine, "the storage is sharded again after gathering it")
local worst_weight, four_bit, adapters = 0, 0, 0
for key, t in pairs(alone_state) do
  check.truthy(full[key] ~= nil, "the gathered state dict holds " .. key)
  if key:find("lora_", 1, true) then
    worst_weight, adapters = math.max(worst_weight, (full[key] - t):abs():max():item()), adapters + 1
  elseif t.dtype == "uint8" then
    check.truthy(full[key]:numel() == t:numel() and full[key]:eq(t):all():item(), key .. ": one process's bytes")
    four_bit = four_bit + 1
  end
end
check.equal(adapters, 28, "28 adapter tensors")
check.truthy(four_bit >= 14 * 2, "the codes and nested absmax codes of 14 layers compared: " .. four_bit)
if rank == 0 then
  print(string.format("QLoRA under FSDP on 2 ranks, %d AdamW steps: losses within %.2e of one process's, adapter "
                      .. "weights within %.2e (over the mesh's dp_shard: %.2e); %d of %d bytes of 4-bit codes and "
                      .. "absmax per rank", STEPS, worst_loss, worst_weight, mesh_worst, mine, whole_bytes))
end
check.truthy(worst_weight <= WEIGHT_TOLERANCE, string.format("the adapters equal one process's within %g: %.3g",
                                                             WEIGHT_TOLERANCE, worst_weight))

-- What the sharded model saves is one process's: acc:save_model's weights
-- (the 4-bit tensors byte for byte), and save_pretrained of the adapter
-- from the gathered state dict (within the tolerance).
local ck = core.formats
local model_dir, adapter_dir = folder .. "-model", folder .. "-adapter"
acc:save_model(model, model_dir)
check.equal(four_bit_bytes(acc:unwrap_model(model)), mine, "save_model leaves the 4-bit storage sharded")
acc:unwrap_model(model):save_pretrained(adapter_dir, { is_main_process = acc.is_main_process, state_dict = full })
acc:wait_for_everyone()
local saved = ck.load_weights(model_dir)
local adapter = ck.read_safetensors(adapter_dir .. "/adapter_model.safetensors")
local n, worst_saved = 0, 0
for key, t in pairs(alone_state) do
  if not key:find("lora_", 1, true) then
    check.truthy(saved[key] ~= nil and saved[key].dtype == t.dtype and saved[key]:numel() == t:numel()
                 and saved[key]:eq(t):all():item(), "save_model writes one process's " .. key)
    n = n + 1
  end
end
check.truthy(n >= 14 * 6, "save_model's 4-bit tensors, norms and embeddings compared: " .. n)
local compared = 0
for key, t in pairs(alone_state) do
  local short = key:find("lora_", 1, true) and key:gsub("%.default%.weight$", ".weight")
  if short and adapter[short] then
    worst_saved, compared = math.max(worst_saved, (adapter[short] - t):abs():max():item()), compared + 1
  end
end
check.equal(compared, 28, "save_pretrained writes the 28 adapter tensors")
check.truthy(worst_saved <= WEIGHT_TOLERANCE, string.format("the saved adapter is one process's within %g: %.3g",
                                                            WEIGHT_TOLERANCE, worst_saved))

-- save_state and load_state: a round trip gives the same next loss.
local state_dir = folder .. "-state"
acc:save_state(state_dir)
local next_loss = step_loss()
acc:load_state(state_dir)
check.equal(four_bit_bytes(acc:unwrap_model(model)), mine, "load_state leaves the 4-bit storage sharded")
check.near(step_loss(), next_loss, 1e-6, "after load_state the next step's loss is the one after save_state")

-- With SHARDED_STATE_DICT each rank writes its own shard of the codes among its buffers and reads it back.
local sharded_dir = folder .. "-sharded-state"
acc, model, mine, step_loss = train("FSDP, SHARDED_STATE_DICT", { fsdp_plugin = accel.FullyShardedDataParallelPlugin{
  sharding_strategy = "FULL_SHARD", transformer_layer_cls = "LlamaDecoderLayer", state_dict_type = "SHARDED_STATE_DICT" } })
acc:save_state(sharded_dir)
next_loss = step_loss()
acc:load_state(sharded_dir)
check.equal(four_bit_bytes(acc:unwrap_model(model)), mine, "SHARDED_STATE_DICT: load_state keeps the shards")
check.near(step_loss(), next_loss, 1e-6, "SHARDED_STATE_DICT: after load_state the next loss is the one after save_state")
acc:wait_for_everyone()
if acc.is_main_process then
  for _, dir in ipairs({ folder, model_dir, adapter_dir, state_dir, sharded_dir }) do ck.remove_folder(dir) end
end
check.done("test_qlora_fsdp_2ranks")
