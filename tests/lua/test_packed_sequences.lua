-- Packing without cross-talk: documents packed into rows, their position_ids
-- restarting at each (TRL's padding_free, TokenizedDataset's packing), give
-- every document the logits and loss it gets alone (1e-5), on each
-- pretrained decoder architecture (llama, mistral with a sliding window
-- shorter than the documents, qwen2, mixtral, gpt2's learned positions),
-- in a batch of two rows, one padded with one-token documents, with and
-- without an attention mask of ones; the gradients equal the documents'
-- alone summed. Without the restarting positions the documents see each
-- other (the check that the test can fail).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local packed = dofile(arg[0]:match("(.*/)") .. "helpers/packed_check.lua")

local first = packed.documents({ 5, 7, 4 }, 1)
local second = packed.documents({ 6, 3 }, 2)
for _, arch in ipairs(packed.architectures) do
  accel.set_seed(7)
  local model = accel.models.from_config(arch.config):eval()
  local alone_first, alone_second = packed.alone(model, first), packed.alone(model, second)
  local row1, starts1 = packed.row(first)
  local row2, starts2 = packed.row(second, 7)  -- 9 tokens and 7 of padding: 16, as row 1
  local batch = {
    input_ids = accel.cat({ row1.input_ids, row2.input_ids }, 1),
    position_ids = accel.cat({ row1.position_ids, row2.position_ids }, 1),
    labels = accel.cat({ row1.labels, row2.labels }, 1),
  }
  for _, with_mask in ipairs({ false, true }) do
    local inputs = { input_ids = batch.input_ids, position_ids = batch.position_ids, labels = batch.labels }
    if with_mask then inputs.attention_mask = accel.ones_like(batch.input_ids) end
    local out = model(inputs)
    local what = arch.name .. (with_mask and " (attention_mask of ones)" or "")
    for b, set in ipairs({ { first, starts1, alone_first }, { second, starts2, alone_second } }) do
      for i, d in ipairs(set[1]) do
        check.near(out.logits:narrow(1, b, 1):narrow(2, set[2][i], d:numel()), set[3][i].logits, 1e-5,
                   string.format("%s: row %d document %d's logits as alone", what, b, i))
      end
    end
    local all = {}
    for _, a in ipairs(alone_first) do all[#all + 1] = a end
    for _, a in ipairs(alone_second) do all[#all + 1] = a end
    check.near(out.loss:item(), packed.mean_loss(all), 1e-5, what .. ": the packed loss is the documents' mean")
  end

  -- Gradients: the packed row's summed loss against the documents' alone.
  local row_out = model{ input_ids = row1.input_ids, position_ids = row1.position_ids, labels = row1.labels }
  model:zero_grad()
  local targets = 0
  for _, d in ipairs(first) do targets = targets + d:numel() - 1 end
  (row_out.loss * targets):backward()
  local packed_grads = {}
  for name, p in model:named_parameters() do packed_grads[name] = p.grad:clone() end
  model:zero_grad()
  for _, d in ipairs(first) do
    (model{ input_ids = d:view(1, -1), labels = d:view(1, -1) }.loss * (d:numel() - 1)):backward()
  end
  for name, p in model:named_parameters() do
    check.near(packed_grads[name], p.grad, 1e-5, arch.name .. ": " .. name .. "'s gradient as the documents' alone")
  end

  -- Positions counting through the row: the documents see each other.
  local crossed = model{ input_ids = row1.input_ids }.logits:narrow(2, starts1[2], first[2]:numel())
  check.truthy((crossed - alone_first[2].logits):abs():max():item() > 1e-3,
               arch.name .. ": without restarting positions the second document sees the first")
end
check.done("packed sequences")
