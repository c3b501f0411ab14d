-- accel's apply_chat_template against transformers' (chat_template_cases.py
-- wrote what transformers gave): for every case the same text, the same ids
-- and the same assistant masks, or an error saying what transformers' said.
-- Then save_pretrained writes the named templates for the shell test to
-- read back with transformers.
--   accel-run chat_template_parity.lua -- CASES_DIR SAVED_DIR
local accel = require("accel")
local core = require("accel.core")

local cases_dir, saved_dir = arg[1], arg[2]
local data = core.json.read(cases_dir .. "/cases.json", 64 * 1024 * 1024)
local tok = accel.tokenizers.from_pretrained(cases_dir .. "/tokenizer")

local failures, checked = 0, 0
local function check(ok, what, detail)
  checked = checked + 1
  if not ok then
    failures = failures + 1
    print("FAILED: " .. what .. (detail and ("\n  " .. detail) or ""))
  end
end

local function same_list(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end

local function first_difference(a, b)
  for i = 1, math.max(#a, #b) do
    if a[i] ~= b[i] then return string.format("at %d: accel %s, transformers %s", i, tostring(a[i]), tostring(b[i])) end
  end
  return "none"
end

check(tok.chat_template == data.templates.smollm2, "the folder's chat_template.jinja is tok.chat_template")

for _, c in ipairs(data.cases) do
  local options = {}
  for k, v in pairs(c.options) do options[k] = v end
  if c.template == "named" then
    tok.chat_template = data.named
  else
    tok.chat_template = nil
    options.chat_template = data.templates[c.template]
  end
  local mask = options.return_assistant_tokens_mask
  options.return_assistant_tokens_mask = nil
  local text_options = {}
  for k, v in pairs(options) do text_options[k] = v end
  text_options.tokenize = false
  local ok, text = pcall(tok.apply_chat_template, tok, c.messages, text_options)
  if c.error then
    check(not ok and tostring(text):find(c.error, 1, true) ~= nil, c.name .. ": fails as transformers' does",
          "transformers: " .. c.error .. "\n  accel: " .. tostring(text))
  elseif not ok then
    check(false, c.name .. ": renders", tostring(text))
  else
    check(text == c.text, c.name .. ": the same text", string.format("accel:\n%q\n  transformers:\n%q", text, c.text))
    options.return_assistant_tokens_mask = mask
    local out = tok:apply_chat_template(c.messages, options)
    check(same_list(out.input_ids, c.input_ids), c.name .. ": the same ids", first_difference(out.input_ids, c.input_ids))
    check(#out.attention_mask == #c.input_ids, c.name .. ": an attention mask per id")
    if mask then
      check(same_list(out.assistant_masks, c.assistant_masks), c.name .. ": the same assistant masks",
            first_difference(out.assistant_masks, c.assistant_masks))
      local masked = 0
      for _, m in ipairs(out.assistant_masks) do masked = masked + m end
      check(masked > 0, c.name .. ": some tokens are the assistant's")
    end
  end
end

tok.chat_template = data.named
tok:save_pretrained(saved_dir)
print(string.format("chat template parity: %d checks, %d failed, over %d cases", checked, failures, #data.cases))
os.exit(failures == 0 and 0 or 1)
