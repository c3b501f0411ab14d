-- accel's fine-tuning data and training against TRL's SFTTrainer with
-- padding-free packing (make_sft_reference.py): the same prompt-completion
-- records through TokenizedDataset{packing = true} (best-fit decreasing
-- rows of 32, completion_only_loss) give TRL's rows, token for token, label
-- for label, position for position; 10 AdamW steps on them give TRL's
-- losses.
-- With "chat", the records are conversations and the loss on the
-- assistant's turns alone (messages_key, assistant_only_loss).
--   accel-run sft_parity.lua -- REFERENCE_DIR DATA [chat]
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local ref_dir, data = arg[1], arg[2]
local reference = require("accel.core").json.read(ref_dir .. "/reference.json")
-- Measured (float32, --threads 2, the largest difference over the 10 steps'
-- losses): 1.4e-6 on this test's prompt-completion records, 9.5e-7 on its
-- conversations, and 9.5e-7 and 1.9e-6 on another draw of 40 records (TRL's
-- PyTorch 2 kernels against LibTorch 1.13's, summed in other orders). 1e-5
-- leaves room for other machines' kernels and still fails a wrong batch,
-- label, position or mask by far (those move the loss by 1e-2 and more).
local TOLERANCE = 1e-5

local tok = accel.tokenizers.from_pretrained(ref_dir .. "/model")
if tok.pad_token_id == nil then tok.pad_token_id = tok.eos_token_id end
local chat = arg[3] == "chat"
local ds = accel.tokenizers.TokenizedDataset(data, tok, {
  completion_key = not chat and "completion" or nil, messages_key = chat and "messages" or nil,
  assistant_only_loss = chat, packing = true, max_length = chat and 64 or 32,
})
check.equal(ds:__len(), reference.rows, "as many packed rows as TRL's")
-- Each step takes two rows of one pass over the data, as TRL's did.
assert(ds:__len() >= 2 * #reference.steps, string.format(
  "the data packs into %d rows, fewer than %d steps of 2 need: give the test more records", ds:__len(), #reference.steps))

local acc = accel.Accelerator{}
local model = accel.models.from_pretrained(ref_dir .. "/model"):train()
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0 })
local worst = 0
for step, expected in ipairs(reference.steps) do
  local rows = {}
  for r = 2 * step - 1, 2 * step do rows[#rows + 1] = { ds:get(r) } end
  local function stacked(k) return accel.stack({ rows[1][k], rows[2][k] }, 1) end
  local ids, mask, labels, positions = stacked(1), stacked(2), stacked(3), stacked(4)
  -- TRL flattens the batch's rows, unpadded, into one: the real tokens of ours in order.
  local real = mask:eq(1)
  check.near(ids:masked_select(real), expected.input_ids, 0, string.format("step %d: TRL's tokens", step))
  check.near(labels:masked_select(real), expected.labels, 0, string.format("step %d: TRL's labels", step))
  check.near(positions:masked_select(real), expected.position_ids, 0, string.format("step %d: TRL's positions", step))
  local loss = model{ input_ids = ids, attention_mask = mask, labels = labels, position_ids = positions }.loss
  worst = math.max(worst, math.abs(loss:item() - expected.loss))
  check.near(loss:item(), expected.loss, TOLERANCE, string.format("step %d: TRL's loss", step))
  loss:backward()
  acc:clip_grad_norm(model:parameters(), 1.0)
  opt:step()
  opt:zero_grad()
end
print(string.format("10 steps: the largest loss difference from TRL's is %.3g", worst))
check.done("SFTTrainer parity")
