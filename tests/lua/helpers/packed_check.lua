-- What the packing tests share: tiny configs of the pretrained decoder
-- architectures, and documents packed into rows as TokenizedDataset's
-- packing and TRL's padding_free collator give them (position_ids from 0 at
-- each document, the first label of each -100; padding as one-token
-- documents), with the logits and loss each document gets alone.
local packed_check = {}

local base = { vocab_size = 40, hidden_size = 16, intermediate_size = 32, num_hidden_layers = 2,
               num_attention_heads = 4, num_key_value_heads = 2 }
local function config(extra)
  local c = {}
  for k, v in pairs(base) do c[k] = v end
  for k, v in pairs(extra) do c[k] = v end
  return c
end

-- name -> config; ring = true where context parallelism takes the model.
packed_check.architectures = {
  { name = "llama", ring = true, config = config({ model_type = "llama" }) },
  { name = "mistral", config = config({ model_type = "mistral", sliding_window = 3 }) },
  { name = "qwen2", ring = true, config = config({ model_type = "qwen2" }) },
  { name = "mixtral", ring = true, config = config({ model_type = "mixtral", num_local_experts = 4,
                                                    num_experts_per_tok = 2 }) },
  { name = "gpt2", config = { model_type = "gpt2", vocab_size = 40, n_embd = 16, n_layer = 2, n_head = 2 } },
}

-- Documents of these lengths, random ids (seeded).
function packed_check.documents(lengths, seed)
  accel.set_seed(seed)
  local docs = {}
  for i, n in ipairs(lengths) do docs[i] = accel.randint(0, base.vocab_size, { n }) end
  return docs
end

-- One packed row of `docs`, padded with `pad` one-token documents: input_ids,
-- position_ids, labels (1, T), and each document's first column (1-based).
function packed_check.row(docs, pad)
  local ids, positions, labels, starts, at = {}, {}, {}, {}, 1
  for i, d in ipairs(docs) do
    local n = d:numel()
    ids[#ids + 1], positions[#positions + 1] = d, accel.arange(0, n, { dtype = accel.int64 })
    local l = d:clone()
    l[1] = -100
    labels[#labels + 1] = l
    starts[i], at = at, at + n
  end
  if pad and pad > 0 then
    ids[#ids + 1] = accel.zeros({ pad }, { dtype = accel.int64 })
    positions[#positions + 1] = accel.zeros({ pad }, { dtype = accel.int64 })
    labels[#labels + 1] = accel.full({ pad }, -100, { dtype = accel.int64 })
  end
  local function row(parts) return accel.cat(parts, 1):view(1, -1) end
  return { input_ids = row(ids), position_ids = row(positions), labels = row(labels) }, starts
end

-- Each document alone: its logits (1, n, V) and its summed loss over its n - 1 targets.
function packed_check.alone(model, docs)
  local out = {}
  for i, d in ipairs(docs) do
    -- skip_logits = false: a model training with labels keeps no logits
    -- (its loss is computed in chunks) unless asked.
    local r = model{ input_ids = d:view(1, -1), labels = d:view(1, -1), skip_logits = false }
    out[i] = { logits = r.logits, loss_sum = r.loss:item() * (d:numel() - 1), targets = d:numel() - 1 }
  end
  return out
end

-- The token-weighted mean of the documents' losses: a packed row's loss.
function packed_check.mean_loss(alone)
  local sum, n = 0, 0
  for _, a in ipairs(alone) do sum, n = sum + a.loss_sum, n + a.targets end
  return sum / n
end

return packed_check
