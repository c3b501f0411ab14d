-- accel.peft against PEFT (make_peft_reference.py wrote REF_DIR): for each
-- case, from the same base checkpoint and PEFT's initial adapter, 10 AdamW
-- steps give PEFT's losses and adapter weights; the trained model's logits,
-- its logits inside disable_adapter and merge_and_unload's logits equal
-- PEFT's; PEFT's trained adapter loads in accel with PEFT's logits. The
-- adapter accel saves goes to OUT_DIR/CASE/accel_adapter and the merged
-- model's save_pretrained to OUT_DIR/CASE/merged, for check_peft_saved.py
-- to load in PEFT and transformers.
-- Usage: accel-run peft_parity.lua -- REF_DIR OUT_DIR
local core = require("accel.core")
local ck = core.formats
local ref_dir, out_dir = arg[1], arg[2]
assert(ref_dir and out_dir, "usage: accel-run peft_parity.lua -- REF_DIR OUT_DIR")

local TOLERANCE = 1e-5
local failures = 0

local function max_diff(a, b)
  return (a - b):abs():max():item()
end

local function expect(ok, message)
  print((ok and "ok: " or "FAILED: ") .. message)
  if not ok then failures = failures + 1 end
end

local function close(what, diff)
  expect(diff <= TOLERANCE, string.format("%s (max abs diff %.2e)", what, diff))
end

local function logits(model, ref)
  return accel.no_grad(function()
    return model{ input_ids = ref.input_ids, attention_mask = ref.attention_mask }.logits
  end)
end

local function run(case)
  local dir = ref_dir .. "/" .. case
  local ref = ck.read_safetensors(dir .. "/reference.safetensors")
  local facts = core.json.read(dir .. "/facts.json")

  local model = accel.peft.from_pretrained(accel.models.from_pretrained(dir .. "/base"), dir .. "/init_adapter",
                                           { is_trainable = true })
  model:train()
  local trainable, all = model:get_nb_trainable_parameters()
  expect(trainable == facts.trainable and all == facts.all,
         string.format("%s: %d trainable of %d parameters, as PEFT counts them (%d of %d)", case, trainable, all,
                       facts.trainable, facts.all))

  local opt = accel.optim.AdamW(model:parameters())
  for _, key in ipairs({ "lr", "beta1", "beta2", "eps", "weight_decay", "amsgrad" }) do
    local torch_value = facts.adamw[key]
    if type(torch_value) == "boolean" then torch_value = torch_value and 1 or 0 end
    expect(opt:option(key) == torch_value, string.format("%s: AdamW's default %s is torch's (%s)", case, key,
                                                         tostring(torch_value)))
  end

  local worst = 0
  for step = 1, ref.losses:size(1) do
    local loss = model{ input_ids = ref.input_ids, attention_mask = ref.attention_mask, labels = ref.labels }.loss
    worst = math.max(worst, math.abs(loss:item() - ref.losses[step]:item()))
    loss:backward()
    opt:step()
    opt:zero_grad()
  end
  close(case .. ": the losses of 10 AdamW steps equal PEFT's", worst)

  local saved = out_dir .. "/" .. case .. "/accel_adapter"
  model:save_pretrained(saved)
  local ours = ck.read_safetensors(saved .. "/adapter_model.safetensors")
  local theirs = ck.read_safetensors(dir .. "/trained_adapter/adapter_model.safetensors")
  local same_names, weights = true, 0
  for name, t in pairs(theirs) do
    if ours[name] == nil then
      same_names = false
      print("  accel's adapter file lacks " .. name)
    else
      weights = math.max(weights, max_diff(ours[name], t))
    end
  end
  for name in pairs(ours) do
    if theirs[name] == nil then
      same_names = false
      print("  accel's adapter file has " .. name .. ", PEFT's does not")
    end
  end
  expect(same_names, case .. ": accel's adapter file holds the tensors PEFT's does, under its names")
  close(case .. ": the trained adapter weights equal PEFT's", weights)
  local moved = 0
  for name, t in pairs(ck.read_safetensors(dir .. "/init_adapter/adapter_model.safetensors")) do
    moved = math.max(moved, max_diff(t, theirs[name]))
  end
  expect(moved > 100 * TOLERANCE, string.format("%s: training moved the adapter (by up to %.2e), so equal "
                                                .. "weights say something", case, moved))

  model:eval()
  close(case .. ": the trained model's logits equal PEFT's", max_diff(logits(model, ref), ref.logits_trained))
  close(case .. ": the logits inside disable_adapter equal PEFT's",
        max_diff(model:disable_adapter(function() return logits(model, ref) end), ref.logits_base))

  local loaded = accel.peft.from_pretrained(accel.models.from_pretrained(dir .. "/base"),
                                            dir .. "/trained_adapter")
  close(case .. ": PEFT's trained adapter loads in accel with PEFT's logits",
        max_diff(logits(loaded, ref), ref.logits_trained))

  local merged = model:merge_and_unload()
  expect(getmetatable(merged) == getmetatable(accel.models.from_pretrained(dir .. "/base")),
         case .. ": merge_and_unload returns the plain model")
  close(case .. ": merge_and_unload's logits equal PEFT's merged model's", max_diff(logits(merged, ref),
                                                                                   ref.logits_merged))
  merged:save_pretrained(out_dir .. "/" .. case .. "/merged")
end

for case in io.lines(ref_dir .. "/cases.txt") do run(case) end
print(string.format("peft_parity: %d failed", failures))
os.exit(failures == 0 and 0 or 1)
