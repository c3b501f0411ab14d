-- The replies recipes/chat.lua must give, for tests/models/test_chat_recipe.sh:
-- greedy generation on the chat template's rendering of the conversation so
-- far, each reply decoded and kept for the next turn. Prints
-- "reply N: TEXT" for each user line given, and "alone 2: TEXT" (the second
-- reply without the first exchange, which the kept history must change);
-- and checks TextStreamer: the text arrives in several pieces that join to
-- the decoded reply.
--   accel-run chat_check.lua -- MODEL_DIR MAX_NEW_TOKENS LINE...
local model_dir, max_new = arg[1], tonumber(arg[2])
local model = accel.models.from_pretrained(model_dir):eval()
local tok = accel.tokenizers.from_pretrained(model_dir)
local function reply(history, streamer)
  local ids = tok:apply_chat_template(history, { add_generation_prompt = true, tokenize = true }).input_ids
  local prompt = accel.tensor(ids, { dtype = accel.int64 }):view(1, -1)
  local out = accel.no_grad(function()
    return model:generate(prompt, { max_new_tokens = max_new, do_sample = false,
                                    pad_token_id = tok.pad_token_id or tok.eos_token_id, streamer = streamer })
  end)
  return tok:decode(out[1]:narrow(1, prompt:size(2) + 1, out:size(2) - prompt:size(2)), { skip_special_tokens = true })
end
local history = {}
for i = 3, #arg do
  history[#history + 1] = { role = "user", content = arg[i] }
  local pieces = {}
  local text = reply(history, accel.tokenizers.TextStreamer(tok, {
    skip_prompt = true, skip_special_tokens = true, on_text = function(t) pieces[#pieces + 1] = t end }))
  assert(table.concat(pieces) == text, "the streamed pieces join to the reply")
  assert(#pieces > 2, "the reply streams in pieces, got " .. #pieces)
  print(string.format("reply %d: %s", i - 2, text))
  history[#history + 1] = { role = "assistant", content = text }
end
print(string.format("alone 2: %s", reply({ { role = "user", content = arg[4] } })))
