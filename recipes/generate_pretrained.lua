-- Distributed inference with a pretrained checkpoint, as Accelerate's docs
-- do it: every process loads the model, takes its share of the prompts with
-- split_between_processes, tokenizes them (left padding, so every row ends
-- where generation starts), generates, decodes, and the main process prints
-- every prompt's text, gathered from all the processes.
--   accel-run recipes/generate_pretrained.lua --nproc 2 -- MODEL_DIR [MAX_MEMORY] [MAX_NEW_TOKENS]
-- MODEL_DIR is a Hugging Face folder (config.json, model.safetensors,
-- tokenizer.json or tokenizer.model). With MAX_MEMORY (a size such as
-- "2GB"), device_map = "auto" keeps that much of the model in memory and
-- offloads the rest to disk, read around each offloaded layer's forward:
-- a model bigger than memory generates. With CONVERSATIONS, a JSON Lines
-- file of {"messages": [...]}, the prompts are those conversations, each
-- rendered by the tokenizer's chat template with its generation prompt, and
-- the main process prints each one's reply.
local usage = "usage: accel-run recipes/generate_pretrained.lua -- MODEL_DIR [MAX_MEMORY] [MAX_NEW_TOKENS] "
    .. "[CONVERSATIONS]"
local model_dir, max_memory = assert(arg[1], usage), arg[2] ~= "" and arg[2] or nil
local max_new_tokens = tonumber(arg[3] ~= "" and arg[3] or "32")
local conversations_file = arg[4]
local prompts = {
  "The capital of France is",
  "Once upon a time,",
  "def fibonacci(n):",
  "The three primary colours are",
  "In 1969, astronauts",
  "A good recipe for bread needs",
}

local acc = accel.Accelerator()
local options = { dtype = "auto" }
if max_memory then
  local name = os.tmpname()  -- a fresh name; each process offloads into its own folder
  os.remove(name)
  options.device_map, options.max_memory = "auto", { cpu = tonumber(max_memory) or max_memory }
  options.offload_folder = name .. "-offload"
end
local model = accel.models.from_pretrained(model_dir, options)
local tok = accel.tokenizers.from_pretrained(model_dir)
-- A batch pads; a tokenizer without a pad token pads with eos, as is usual
-- for decoder checkpoints (the attention mask hides it).
if tok.pad_token_id == nil then tok.pad_token_id = tok.eos_token_id end

-- Conversations: each rendered by the chat template, the batch padded on the left.
local function chat_batch(conversations)
  local rows, width = {}, 0
  for i, messages in ipairs(conversations) do
    rows[i] = tok:apply_chat_template(messages, { add_generation_prompt = true, tokenize = true }).input_ids
    width = math.max(width, #rows[i])
  end
  local ids, mask = {}, {}
  for i, row in ipairs(rows) do
    ids[i], mask[i] = {}, {}
    for j = 1, width do
      local k = j - (width - #row)
      ids[i][j], mask[i][j] = k >= 1 and row[k] or tok.pad_token_id, k >= 1 and 1 or 0
    end
  end
  return { input_ids = accel.tensor(ids, { dtype = accel.int64 }), attention_mask = accel.tensor(mask, { dtype = accel.int64 }) }
end

if conversations_file then
  prompts = {}
  local n = 0
  for line in assert(io.open(conversations_file, "rb")):lines() do
    n = n + 1
    if line:find("%S") then
      local record = require("accel.core").json.decode(line, string.format("'%s' line %d", conversations_file, n))
      if type(record) ~= "table" or type(record.messages) ~= "table" then
        error(string.format("generate_pretrained.lua: '%s' line %d has no \"messages\" list", conversations_file, n), 0)
      end
      prompts[#prompts + 1] = record.messages
    end
  end
end

local mine = acc:split_between_processes(prompts)
local texts = {}
if #mine > 0 and conversations_file then
  local batch = chat_batch(mine)
  local out = model:generate(batch.input_ids, { attention_mask = batch.attention_mask,
                                                max_new_tokens = max_new_tokens, do_sample = false,
                                                pad_token_id = tok.pad_token_id })
  local prompt_length = batch.input_ids:size(2)
  for i = 1, #mine do
    texts[i] = tok:decode(out[i]:narrow(1, prompt_length + 1, out:size(2) - prompt_length), { skip_special_tokens = true })
  end
elseif #mine > 0 then
  local batch = tok(mine, { padding = true, padding_side = "left" })
  local out = model:generate(batch.input_ids, { attention_mask = batch.attention_mask,
                                                max_new_tokens = max_new_tokens, do_sample = false,
                                                pad_token_id = tok.pad_token_id })
  local prompt_length = batch.input_ids:size(2)
  for i = 1, #mine do
    local new = out[i]:narrow(1, prompt_length + 1, out:size(2) - prompt_length)
    texts[i] = mine[i] .. tok:decode(new, { skip_special_tokens = true })
  end
end

local all = {}
for _, part in ipairs(acc:gather_object(texts)) do
  for _, text in ipairs(part) do all[#all + 1] = text end
end
if acc.is_main_process then
  for i, text in ipairs(all) do print(string.format("[%d] %s", i, text)) end
end
if options.offload_folder then require("accel.core").formats.remove_folder(options.offload_folder) end
