-- accel's side of bench/models (run.py runs it in a fresh process):
--   accel-run bench/models/accel_side.lua --threads T -- load DIR OUT.json
--   accel-run bench/models/accel_side.lua --threads T -- generate DIR OUT.json NEW_TOKENS REPEATS BATCHES
-- load: times accel.models.from_pretrained(DIR, {dtype = "float32"}) alone,
-- then one forward of 8 tokens (the weights are mapped, not read, by the
-- load: the first forward pages them in).
-- generate: loads the model, then per batch ("b1", "b8" of DIR/prompts.json)
-- one warm-up generate of 8 tokens, then REPEATS times a generate of 1 new
-- token (the prompt's forward: prefill) and one of NEW_TOKENS new tokens
-- (min_new_tokens the same), greedy. Writes the times and the last run's
-- tokens to OUT.json, as transformers_side.py does.
local json = require("accel.core").json
local mode, folder, out_path = arg[1], arg[2], arg[3]
if not (mode and folder and out_path) then
  error("usage: accel-run bench/models/accel_side.lua -- load|generate DIR OUT.json [NEW_TOKENS REPEATS BATCHES]")
end

local result = { side = "accel", threads = accel.get_num_threads() }
local t = accel.time()
local model = accel.models.from_pretrained(folder, { dtype = "float32" })
result.load_s = accel.time() - t

local function generate(ids, mask, new_tokens)
  return model:generate(ids, { attention_mask = mask, max_new_tokens = new_tokens, min_new_tokens = new_tokens,
                               do_sample = false, pad_token_id = 0, eos_token_id = 2 })
end

if mode == "load" then
  local ids = accel.arange(3, 11):view(1, 8)
  t = accel.time()
  local logits = accel.no_grad(function() return model{ input_ids = ids }.logits end)
  result.first_forward_s = accel.time() - t
  result.logits_sum = logits:double():sum():item()
else
  local new_tokens, repeats = tonumber(arg[4]), tonumber(arg[5])
  local prompts = json.read(folder .. "/prompts.json", 1024 * 1024 * 1024)
  for name in arg[6]:gmatch("[^,]+") do
    local ids = accel.LongTensor(prompts[name].input_ids)
    local mask = accel.LongTensor(prompts[name].attention_mask)
    local T = ids:size(2)
    t = accel.time()
    generate(ids, mask, 8)
    local r = { warmup_s = accel.time() - t, prefill_s = {}, generate_s = {}, tokens_same_each_repeat = true }
    for _ = 1, repeats do
      t = accel.time()
      generate(ids, mask, 1)
      r.prefill_s[#r.prefill_s + 1] = accel.time() - t
      t = accel.time()
      local out = generate(ids, mask, new_tokens)
      r.generate_s[#r.generate_s + 1] = accel.time() - t
      local new = out:narrow(2, T + 1, new_tokens):totable()
      if r.tokens and json.encode(r.tokens) ~= json.encode(new) then r.tokens_same_each_repeat = false end
      r.tokens = new
      collectgarbage()
    end
    result[name] = r
  end
end
-- The BLAS libraries this process mapped.
local blas, seen = {}, {}
for line in io.lines("/proc/self/maps") do
  local path = line:match("(/%S+)$")
  local base = path and path:match("[^/]+$")
  if base and (base:find("blas") or base:find("mkl")) and not seen[base] then
    seen[base] = true
    blas[#blas + 1] = base
  end
end
table.sort(blas)
result.blas = blas
local f = assert(io.open(out_path, "w"))
f:write(json.encode(result))
f:close()
