-- Writes text with a character model that recipes/charlm.lua trained and
-- saved with save_model, loaded with accel.load_checkpoint_and_dispatch:
--   accel-run recipes/generate.lua --nproc 2 -- MODEL_DIR [MAX_MEMORY]
-- MODEL_DIR is charlm's PROJECT_DIR/RUN_NAME/model. The prompts are split
-- between the processes; each samples its own without gradients (softmax
-- over the top-k characters, sharpened by a temperature) and the main
-- process gathers and prints them all. With MAX_MEMORY (a size such as
-- "300KB"), device_map = "auto" keeps that much of the model in memory and
-- leaves the rest on disk, read around each offloaded block's forward.
local usage = "usage: accel-run recipes/generate.lua -- MODEL_DIR [MAX_MEMORY]"
local model_dir, max_memory = assert(arg[1], usage), arg[2]
local temperature, top_k, length, seed = 0.8, 10, 80, 0
local prompts = { "The ", "This License ", "You may ", "Each ", "If the ", "For example, ", "We ", "A " }

local config = dofile(model_dir .. "/charlm_config.lua")
local CharLM = dofile(debug.getinfo(1, "S").source:match("^@(.*/)") .. "charlm_model.lua")
local vocab = accel.data.TextDataset(config.text, { seq_len = config.seq_len, level = "char" }).vocab
local acc = accel.Accelerator()

local model = accel.init_empty_weights(function() return CharLM(config) end)
local options = nil
if max_memory then
  options = { device_map = "auto", max_memory = { cpu = tonumber(max_memory) or max_memory },
              no_split_module_classes = { "TransformerEncoderLayer" } }
end
local _, device_map = accel.load_checkpoint_and_dispatch(model, model_dir, options)
model:eval()
if max_memory then acc:print(tostring(device_map)) end

-- Each prompt draws from its own seed, so its text is the same whichever
-- process samples it and however many there are.
local function sample(prompt, index)
  math.randomseed(seed + index)
  return CharLM.sample(model, vocab, prompt, { count = length, temperature = temperature, top_k = top_k,
                                               seq_len = config.seq_len })
end

local positions = {}
for i = 1, #prompts do positions[i] = i end
local texts = {}
for _, i in ipairs(acc:split_between_processes(positions)) do texts[#texts + 1] = { i, sample(prompts[i], i) } end

local all = {}
for _, from_rank in ipairs(acc:gather_object(texts)) do
  for _, entry in ipairs(from_rank) do all[#all + 1] = entry end
end
table.sort(all, function(a, b) return a[1] < b[1] end)
if acc.is_main_process then
  for _, entry in ipairs(all) do print(string.format("[%d] %s", entry[1], entry[2]:gsub("\n", " "))) end
  print(string.format("%d texts from %d processes", #all, acc.num_processes))
end
