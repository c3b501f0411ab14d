-- 4-bit folders both ways (make_4bit_reference.py): a tiny Llama quantized
-- and saved by transformers + bitsandbytes loads in accel with transformers'
-- logits; the same float Llama quantized by accel while it loads holds
-- tensors equal to that folder's byte for byte, and accel's save_pretrained
-- of it writes a folder transformers loads in 4 bits (check_4bit_saved.py
-- compares its logits with the accel_logits.safetensors written here).
--   accel-run four_bit_parity.lua -- REFERENCE_DIR
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ck = require("accel.core").formats
local dir = arg[1]
local ref = ck.read_safetensors(dir .. "/reference.safetensors")
local ids = ref.input_ids
local written = {}

local function logits_of(model) return accel.no_grad(function() return model{ input_ids = ids }.logits end) end

for _, case in ipairs({ { "nf4", true }, { "fp4", false } }) do
  local quant_type, double = case[1], case[2]
  local expected = ref[quant_type .. "|logits"]
  -- transformers' folder, as it is.
  local loaded = accel.models.from_pretrained(dir .. "/" .. quant_type)
  check.truthy(loaded.is_loaded_in_4bit, quant_type .. ": a 4-bit folder loads as a 4-bit model")
  check.equal(loaded.model.layers[1].mlp.up_proj.__name, "Linear4bit", quant_type .. ": its linears are Linear4bit")
  check.equal(loaded.lm_head.__name, "Linear", quant_type .. ": lm_head stays in full precision, as saved")
  local d = (logits_of(loaded) - expected):abs():max():item()
  print(string.format("%s: accel's logits of transformers' 4-bit folder differ by %.2e", quant_type, d))
  check.truthy(d <= 1e-5, quant_type .. ": accel's logits of transformers' 4-bit folder equal transformers' " .. d)

  -- Quantized by accel while the float folder streams in.
  local config = accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant_type = quant_type,
                                           bnb_4bit_use_double_quant = double }
  local model = accel.models.from_pretrained(dir .. "/float", { quantization_config = config })
  local files = ck.read_safetensors(dir .. "/" .. quant_type .. "/model.safetensors")
  local state, compared = model:state_dict(), 0
  for name, t in pairs(files) do
    local mine = state[name]
    check.truthy(mine ~= nil, quant_type .. ": accel's 4-bit model holds " .. name)
    check.truthy(mine.dtype == t.dtype and mine:reshape(-1):equal(t:reshape(-1)),
                 string.format("%s: %s equals transformers' byte for byte", quant_type, name))
    compared = compared + 1
  end
  local n = 0
  for _ in pairs(state) do n = n + 1 end
  check.equal(n, compared, quant_type .. ": and holds nothing else")
  local mine = logits_of(model)
  check.truthy((mine - expected):abs():max():item() <= 1e-5, quant_type .. ": its logits equal transformers'")
  model:save_pretrained(dir .. "/accel_" .. quant_type)
  written[quant_type .. "|logits"] = mine
  local saved = accel.models.config(dir .. "/accel_" .. quant_type)
  check.truthy(saved.quantization_config and saved.quantization_config.quant_method == "bitsandbytes"
               and saved.quantization_config.bnb_4bit_quant_type == quant_type,
               quant_type .. ": the saved config.json carries the quantization_config")
  -- And back: accel's own folder loads in accel with the same logits.
  local again = accel.models.from_pretrained(dir .. "/accel_" .. quant_type)
  check.truthy(logits_of(again):equal(mine), quant_type .. ": accel's 4-bit folder loads back with the same logits")
end
local pairs_list = {}
for name, t in pairs(written) do pairs_list[#pairs_list + 1] = { name, t } end
ck.write_safetensors(dir .. "/accel_logits.safetensors", pairs_list)

check.raises(function() accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant_type = "int4" } end,
             "an unknown quant type", "bnb_4bit_quant_type")
check.raises(function() accel.BitsAndBytesConfig{ load_in_4bit = true, bnb_4bit_quant = "nf4" } end,
             "an unknown key", "unknown option 'bnb_4bit_quant'")
check.done("four_bit_parity")
