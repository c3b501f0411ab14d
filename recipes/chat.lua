-- Chat with a pretrained instruct model in the terminal: each line typed is
-- the user's turn; the tokenizer's chat template renders the conversation so
-- far with its generation prompt, and the reply is written token by token as
-- it decodes (accel.tokenizers.TextStreamer), then kept in the history for
-- the next turn.
--   accel-run recipes/chat.lua -- MODEL_DIR [--system TEXT] [--max_new_tokens N]
--                                [--do_sample] [--temperature T] [--top_p P] [--seed S]
-- Commands: /reset forgets the conversation, /quit (or end of input, Ctrl-D) leaves.
-- One process: generation runs on the main process of accel-run's launch.
local args = require("accel.args")
local usage = "usage: accel-run recipes/chat.lua -- MODEL_DIR [--system TEXT] [--max_new_tokens N] [--do_sample] "
    .. "[--temperature T] [--top_p P] [--seed S]"

local o = { system = "", max_new_tokens = 128, do_sample = false, temperature = 1, top_p = 1, seed = 0 }
local model_dir
local i = 1
while i <= #arg do
  local name = arg[i]:match("^%-%-([%w_]+)$")
  if not name then
    if model_dir then args.error(usage) end
    model_dir = arg[i]
  elseif o[name] == nil then
    args.error(string.format("chat.lua: unknown option '%s' (%s)", arg[i], usage))
  elseif type(o[name]) == "boolean" then
    o[name] = true
  else
    i = i + 1
    local value = arg[i] or args.error(string.format("chat.lua: --%s needs a value", name))
    o[name] = type(o[name]) == "number"
        and (tonumber(value) or args.error(string.format("chat.lua: --%s must be a number, got '%s'", name, value)))
        or value
  end
  i = i + 1
end
if not model_dir then args.error(usage) end
accel.set_seed(o.seed)

local model = accel.models.from_pretrained(model_dir, { dtype = "auto" }):eval()
local tok = accel.tokenizers.from_pretrained(model_dir)
if tok.chat_template == nil then
  args.error(string.format("chat.lua: '%s' has no chat template (chat_template in tokenizer_config.json, or "
                           .. "chat_template.jinja)", model_dir))
end

local function fresh_history()
  return o.system ~= "" and { { role = "system", content = o.system } } or {}
end
local history = fresh_history()
io.write(string.format("chatting with %s (/reset forgets, /quit or Ctrl-D leaves)\n", model_dir))
while true do
  io.write("user> ")
  io.flush()
  local line = io.read("*l")
  if line == nil or line == "/quit" then break end
  if line == "/reset" then
    history = fresh_history()
    io.write("(the conversation is forgotten)\n")
  elseif line:find("%S") then
    history[#history + 1] = { role = "user", content = line }
    local ids = tok:apply_chat_template(history, { add_generation_prompt = true, tokenize = true }).input_ids
    local prompt = accel.tensor(ids, { dtype = accel.int64 }):view(1, -1)
    io.write("assistant> ")
    local out = accel.no_grad(function()
      return model:generate(prompt, {
        max_new_tokens = o.max_new_tokens, do_sample = o.do_sample, temperature = o.temperature, top_p = o.top_p,
        pad_token_id = tok.pad_token_id or tok.eos_token_id,
        streamer = accel.tokenizers.TextStreamer(tok, { skip_prompt = true, skip_special_tokens = true }),
      })
    end)
    local new = out[1]:narrow(1, prompt:size(2) + 1, out:size(2) - prompt:size(2))
    history[#history + 1] = { role = "assistant", content = tok:decode(new, { skip_special_tokens = true }) }
  end
end
io.write("\n")
