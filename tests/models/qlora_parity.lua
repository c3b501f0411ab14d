-- QLoRA against PEFT + bitsandbytes (make_qlora_reference.py): the same
-- float Llama loaded in 4 bits, prepare_model_for_kbit_training, PEFT's
-- initial adapter; 10 AdamW steps give PEFT's losses and, saved in PEFT's
-- format, its trained adapter's weights, within the tolerances measured
-- here (printed): float32 sums taken in another order, through ten steps.
--   accel-run qlora_parity.lua -- REFERENCE_DIR
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ck = require("accel.core").formats
local dir = arg[1]
local ref = ck.read_safetensors(dir .. "/reference.safetensors")
local LOSS_TOLERANCE, WEIGHT_TOLERANCE = 1e-5, 1e-4

local base = accel.models.from_pretrained(dir .. "/float", { quantization_config = accel.BitsAndBytesConfig{
  load_in_4bit = true, bnb_4bit_quant_type = "nf4", bnb_4bit_use_double_quant = true } })
base = accel.peft.prepare_model_for_kbit_training(base)
check.truthy(base.is_gradient_checkpointing, "prepare_model_for_kbit_training turns gradient checkpointing on")
local model = accel.peft.from_pretrained(base, dir .. "/init_adapter", { is_trainable = true })
model:train()
for name, p in model:named_parameters() do
  check.truthy(name:find("lora_", 1, true) ~= nil and p.dtype == "float32",
               "only the float32 adapters train: " .. name)
end
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
local worst_loss = 0
for step = 1, ref.losses:size(1) do
  local loss = model{ input_ids = ref.input_ids, labels = ref.input_ids }.loss
  loss:backward()
  opt:step()
  opt:zero_grad()
  local d = math.abs(loss:item() - ref.losses[step]:item())
  worst_loss = math.max(worst_loss, d)
  check.truthy(d <= LOSS_TOLERANCE, string.format("step %d: loss %.7f, PEFT's %.7f", step, loss:item(),
                                                  ref.losses[step]:item()))
end
model:save_pretrained(dir .. "/accel_adapter")
local mine = ck.read_safetensors(dir .. "/accel_adapter/adapter_model.safetensors")
local theirs = ck.read_safetensors(dir .. "/trained_adapter/adapter_model.safetensors")
local worst_weight, n = 0, 0
for name, t in pairs(theirs) do
  check.truthy(mine[name] ~= nil, "accel's adapter file holds PEFT's " .. name)
  worst_weight = math.max(worst_weight, (mine[name] - t):abs():max():item())
  n = n + 1
end
check.truthy(n == 28, "28 adapter tensors (2 layers x 7 modules x A, B): " .. n)
print(string.format("QLoRA, 10 AdamW steps: losses within %.2e of PEFT's, adapter weights within %.2e", worst_loss,
                    worst_weight))
check.truthy(worst_weight <= WEIGHT_TOLERANCE, "the trained adapter equals PEFT's within " .. WEIGHT_TOLERANCE)
check.done("qlora_parity")
