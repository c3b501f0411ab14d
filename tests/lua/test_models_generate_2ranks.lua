-- nproc: 2
-- Distributed inference as Accelerate's docs do it: every rank builds the
-- same pretrained model, takes its share of the prompts with
-- split_between_processes, generates with left padding, and gather_object
-- brings every rank's sequences together; they equal what one process
-- generates for all the prompts. Then the main process saves the model and
-- every rank loads it back with from_pretrained.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local state = accel.PartialState()

accel.set_seed(7)  -- the same weights on every rank
local model = accel.models.from_config({ model_type = "qwen2", vocab_size = 48, hidden_size = 32,
                                         intermediate_size = 64, num_hidden_layers = 2,
                                         num_attention_heads = 4, num_key_value_heads = 2 }):eval()

local prompts = { { 5, 6, 7 }, { 9 }, { 11, 12, 13, 14 }, { 3, 4 }, { 20, 21, 22 } }

-- Left-padded ids and mask of a list of prompts.
local function batch(list)
  local longest = 0
  for _, p in ipairs(list) do longest = math.max(longest, #p) end
  local ids, mask = {}, {}
  for i, p in ipairs(list) do
    ids[i], mask[i] = {}, {}
    for j = 1, longest do
      local k = j - (longest - #p)
      ids[i][j], mask[i][j] = k >= 1 and p[k] or 0, k >= 1 and 1 or 0
    end
  end
  return accel.LongTensor(ids), accel.LongTensor(mask)
end

-- Each prompt's new tokens, as a Lua list.
local function generate(list)
  local ids, mask = batch(list)
  local out = model:generate(ids, { attention_mask = mask, max_new_tokens = 6, eos_token_id = 47, pad_token_id = 0 })
  local new = {}
  for i = 1, #list do new[i] = out[i]:narrow(1, ids:size(2) + 1, out:size(2) - ids:size(2)):totable() end
  return new
end

local mine = generate(state:split_between_processes(prompts))
local gathered = {}
for _, part in ipairs(state:gather_object(mine)) do
  for _, seq in ipairs(part) do gathered[#gathered + 1] = seq end
end
check.equal(#gathered, #prompts, "every prompt was generated once across the ranks")
local alone = generate(prompts)
for i = 1, #prompts do
  -- A shorter batch pads differently: the tokens of a finished row may be
  -- padding past its eos, so compare up to the first eos.
  for j = 1, #alone[i] do
    check.equal(gathered[i][j], alone[i][j], string.format("prompt %d, new token %d equals one process's", i, j))
    if alone[i][j] == 47 then break end
  end
end

local name = os.tmpname()  -- a file made to reserve the name; the folder goes beside it
os.remove(name)
local folder = state:gather_object(name .. "-models")[1]  -- the main process's name for it
model:save_pretrained(folder, { is_main_process = state.is_main_process })
state:wait_for_everyone()
local loaded = accel.models.from_pretrained(folder)
local ids, mask = batch(prompts)
local d = (loaded{ input_ids = ids, attention_mask = mask }.logits - model{ input_ids = ids, attention_mask = mask }.logits)
check.near(d:abs():max():item(), 0, 0, "every rank loads the main process's save_pretrained")
state:wait_for_everyone()
if state.is_main_process then require("accel.core").formats.remove_folder(folder) end
check.done("test_models_generate_2ranks")
