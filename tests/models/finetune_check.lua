-- What tests/models/test_finetune_recipe.sh checks of a folder
-- recipes/finetune.lua wrote, loaded afresh as a user would: an adapter
-- (accel.peft.from_pretrained on the base model) or a whole model
-- (accel.models.from_pretrained).
--   accel-run finetune_check.lua -- BASE_DIR TUNED_DIR PROMPT TOKENS [OTHER_TUNED_DIR]
-- Prints the greedy sample the recipe prints for PROMPT ("sample: ..."),
-- how far the tuned model's logits are from the base model's ("moved X"),
-- and with OTHER_TUNED_DIR how far they are from that one's ("differ X").
local base_dir, tuned_dir, prompt, tokens, other_dir = arg[1], arg[2], arg[3], tonumber(arg[4]), arg[5]
assert(tokens, "usage: accel-run finetune_check.lua -- BASE_DIR TUNED_DIR PROMPT TOKENS [OTHER_TUNED_DIR]")

local function load(dir)
  local f = io.open(dir .. "/adapter_config.json", "rb")
  if f then
    f:close()
    return accel.peft.from_pretrained(accel.models.from_pretrained(base_dir), dir)
  end
  return accel.models.from_pretrained(dir)
end

local tok = accel.tokenizers.from_pretrained(tuned_dir)
local tuned = load(tuned_dir)
local ids = tok({ prompt }).input_ids
local out = tuned:generate(ids, { max_new_tokens = tokens, do_sample = false, pad_token_id = tok.eos_token_id })
print("sample: " .. tok:decode(out[1], { skip_special_tokens = true }))

local function logits(model)
  return accel.no_grad(function() return model{ input_ids = out }.logits end)
end
local function distance(a, b) return (a - b):abs():max():item() end
local tuned_logits = logits(tuned)
print(string.format("moved %.9g", distance(tuned_logits, logits(accel.models.from_pretrained(base_dir)))))
if other_dir then print(string.format("differ %.9g", distance(tuned_logits, logits(load(other_dir))))) end
