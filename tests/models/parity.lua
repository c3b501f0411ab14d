-- accel's architectures against transformers' outputs for the tiny
-- checkpoints make_checkpoints.py wrote (its reference.safetensors per
-- case): logits within 1e-4 in float32 (padding positions included), the
-- loss with labels (Mixtral's with its router load-balancing loss), 20 greedy tokens batched with left padding, and BERT's
-- hidden states and mean pooling. Each model is then written with
-- save_pretrained under OUT/<case>, for check_saved.py to load in
-- transformers.
--   accel-run parity.lua -- REFERENCE_DIR OUT_DIR EOS_ID
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ck = require("accel.core").formats
local root, out_root, eos = arg[1], arg[2], tonumber(arg[3])

local function max_diff(a, b, what)
  check.equal(table.concat(a:size(), "x"), table.concat(b:size(), "x"), what .. " shape")
  return (a - b):abs():max():item()
end

local function within(diff, tol, what)
  if not (diff <= tol) then error(string.format("%s differs from transformers' by %.3g (tolerance %g)", what, diff, tol), 2) end
  check.passed = check.passed + 1
end

local function decoder(case, model, ref)
  local out = model{ input_ids = ref.input_ids, attention_mask = ref.attention_mask, labels = ref.labels }
  local d = max_diff(out.logits, ref.logits, case .. " logits")
  within(d, 1e-4, case .. " logits (batched, left padding)")
  local single = model{ input_ids = ref.single_ids }
  local ds = max_diff(single.logits, ref.single_logits, case .. " single logits")
  within(ds, 1e-4, case .. " logits (one sequence)")
  local dl = math.abs(out.loss:item() - ref.loss:item())
  within(dl, 1e-5, case .. " loss")
  if ref.aux_loss ~= nil then
    within(math.abs(out.aux_loss:item() - ref.aux_loss:item()), 1e-5, case .. " router load-balancing loss")
  end
  local generated = model:generate(ref.input_ids, { attention_mask = ref.attention_mask, max_new_tokens = 20,
                                                    min_new_tokens = 20, pad_token_id = 0, eos_token_id = eos })
  if not generated:equal(ref.generated) then
    error(string.format("%s: greedy tokens differ from transformers'\naccel:\n%s\ntransformers:\n%s", case,
                        tostring(generated), tostring(ref.generated)))
  end
  check.passed = check.passed + 1
  print(string.format("%-18s logits %.2e, one sequence %.2e, loss %.2e, 20 greedy tokens equal", case, d, ds, dl))
end

local function encoder(case, model, ref)
  local out = model{ input_ids = ref.input_ids, attention_mask = ref.attention_mask,
                     token_type_ids = ref.token_type_ids }
  local d = max_diff(out.last_hidden_state, ref.last_hidden_state, case .. " last_hidden_state")
  within(d, 1e-4, case .. " last_hidden_state")
  local pooled = accel.models.mean_pooling(out.last_hidden_state, ref.attention_mask)
  local dp = max_diff(pooled, ref.mean_pooled, case .. " mean pooling")
  within(dp, 1e-4, case .. " mean pooling")
  print(string.format("%-18s last_hidden_state %.2e, mean pooling %.2e", case, d, dp))
end

local cases = 0
for case in io.lines(root .. "/cases.txt") do
  local dir = root .. "/" .. case
  local ref = ck.read_safetensors(dir .. "/reference.safetensors")
  local model = accel.models.from_pretrained(dir)
  if ref.logits then decoder(case, model, ref) else encoder(case, model, ref) end
  model:save_pretrained(out_root .. "/" .. case)
  cases = cases + 1
end
check.truthy(cases >= 8, "every architecture's case was checked (" .. cases .. ")")
check.done("parity")
