-- Conversational fine-tuning data (TokenizedDataset with messages_key, and
-- prompt/completion message lists), as TRL's SFTTrainer prepares it: the
-- rows are the chat template's ids (tok:apply_chat_template); labels are
-- the ids everywhere, or with assistant_only_loss only on the template's
-- {% generation %} spans; prompt-completion labels only the completion;
-- truncation_mode "whole_turns" cuts between messages, ending on an
-- assistant turn; packed rows keep each conversation's positions from 0;
-- bad records and templates without generation blocks are errors naming
-- the file and line.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local fixtures = arg[0]:match("(.*/)") .. "../tokenizers/fixtures/byte_level"
local work = os.tmpname()
os.remove(work)
os.execute("mkdir -p '" .. work .. "'")
local function write(name, text)
  local path = work .. "/" .. name
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
  return path
end

local tok = accel.tokenizers.from_pretrained(fixtures)
tok.pad_token_id = tok.eos_token_id
-- ChatML with the assistant's turns in generation blocks, as SmolLM's and Qwen's.
tok.chat_template = "{% for m in messages %}{% if m.role == 'assistant' %}<|im_start|>assistant\n"
    .. "{% generation %}{{ m.content }}<|im_end|>{% endgeneration %}\n{% else %}<|im_start|>{{ m.role }}\n"
    .. "{{ m.content }}<|im_end|>\n{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

local conversations = {
  { { role = "system", content = "be brief" }, { role = "user", content = "hello" },
    { role = "assistant", content = "hello the world" } },
  { { role = "user", content = "the end" }, { role = "assistant", content = "the world" },
    { role = "user", content = "hello" }, { role = "assistant", content = "hello world the end" } },
}
local lines = {}
for i, c in ipairs(conversations) do
  lines[i] = require("accel.core").json.encode({ messages = c }):gsub("\n%s*", "")
end
local chats = write("chats.jsonl", table.concat(lines, "\n") .. "\n")

local all = accel.tokenizers.TokenizedDataset(chats, tok, { messages_key = "messages", max_length = 200 })
local only = accel.tokenizers.TokenizedDataset(chats, tok, { messages_key = "messages", max_length = 200,
                                                             assistant_only_loss = true })
for i, c in ipairs(conversations) do
  local expected = tok:apply_chat_template(c, { tokenize = true, return_dict = true,
                                                return_assistant_tokens_mask = true })
  local n = #expected.input_ids
  local ids, mask, labels = all:get(i)
  check.equal(mask:sum():item(), n, "conversation " .. i .. ": the template's tokens, padded")
  check.near(ids:narrow(1, 1, n), expected.input_ids, 0, "conversation " .. i .. ": the template's ids")
  check.near(labels:narrow(1, 1, n), expected.input_ids, 0, "conversation " .. i .. ": every token learnt")
  local _, _, only_labels = only:get(i)
  local want = {}
  for j, id in ipairs(expected.input_ids) do want[j] = expected.assistant_masks[j] == 1 and id or -100 end
  check.near(only_labels:narrow(1, 1, n), want, 0, "conversation " .. i .. ": assistant_only_loss keeps the replies")
  check.truthy(only_labels:ne(-100):sum():item() > 0 and only_labels:eq(-100):sum():item() > n / 3,
               "conversation " .. i .. ": some tokens learnt, the others' -100")
end

-- Whole turns: the second conversation cut after its first reply.
local first_exchange = tok:apply_chat_template({ conversations[2][1], conversations[2][2] }, { tokenize = true }).input_ids
local full_length = #tok:apply_chat_template(conversations[2], { tokenize = true }).input_ids
local cut = accel.tokenizers.TokenizedDataset(chats, tok, { messages_key = "messages", max_length = full_length - 1,
                                                            truncation_mode = "whole_turns", assistant_only_loss = true })
local ids, mask = cut:get(2)
check.equal(mask:sum():item(), #first_exchange, "whole_turns keeps the messages up to the last reply that fits")
check.near(ids:narrow(1, 1, #first_exchange), first_exchange, 0, "and renders them alone")
local kept = accel.tokenizers.TokenizedDataset(chats, tok, { messages_key = "messages", max_length = full_length - 1 })
check.equal(kept:get(2):size(1), full_length - 1, "keep_start cuts tokens instead")
check.raises(function()
  accel.tokenizers.TokenizedDataset(write("t.jsonl", '{"text": "hi"}\n'), tok, { truncation_mode = "whole_turns" })
end, "whole_turns without conversations", 'truncation_mode "whole_turns" cuts conversations')

-- Packed: both conversations in one row, each from position 0, the first label of each -100.
local packed = accel.tokenizers.TokenizedDataset(chats, tok, { messages_key = "messages", max_length = 200,
                                                               packing = true, assistant_only_loss = true })
check.equal(packed.length, 1, "two conversations in one packed row")
local pids, pmask, plabels, positions = packed:get(1)
local n1 = #tok:apply_chat_template(conversations[2], { tokenize = true }).input_ids  -- the longer first (bfd)
check.equal(positions[n1 + 1]:item(), 0, "the second conversation starts again at position 0")
check.equal(positions[n1]:item(), n1 - 1, "the first counts up to its end")
check.equal(plabels[1]:item(), -100, "no label at a conversation's first token")

-- Prompt-completion in conversational form: labels on the completion only.
local pc = write("pc.jsonl", require("accel.core").json.encode({
  prompt = { { role = "user", content = "hello" } }, completion = { { role = "assistant", content = "the world" } },
}):gsub("\n%s*", "") .. "\n")
local pc_ds = accel.tokenizers.TokenizedDataset(pc, tok, { completion_key = "completion", max_length = 200 })
local prompt_ids = tok:apply_chat_template({ { role = "user", content = "hello" } },
                                           { tokenize = true, add_generation_prompt = true }).input_ids
local full = tok:apply_chat_template({ { role = "user", content = "hello" }, { role = "assistant", content = "the world" } },
                                     { tokenize = true }).input_ids
local x, m, y = pc_ds:get(1)
check.near(x:narrow(1, 1, #full), full, 0, "prompt + completion through the template")
local want = {}
for j, id in ipairs(full) do want[j] = j <= #prompt_ids and -100 or id end
check.near(y:narrow(1, 1, #full), want, 0, "labels -100 on the prompt with its generation prompt")

-- Errors.
check.raises(function()
  accel.tokenizers.TokenizedDataset(write("bad.jsonl", '{"messages": [{"role": "user", "content": "a"}]}\n{"messages": 3}\n'),
                                    tok, { messages_key = "messages" })
end, "messages that are not a list", "line 2", '"messages" must be a non-empty list of messages')
check.raises(function()
  accel.tokenizers.TokenizedDataset(write("nokey.jsonl", '{"text": "a"}\n'), tok, { messages_key = "messages" })
end, "a record without messages", "line 1 has no \"messages\"")
local plain = accel.tokenizers.from_pretrained(fixtures)
plain.pad_token_id = plain.eos_token_id
plain.chat_template = "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
check.raises(function()
  accel.tokenizers.TokenizedDataset(chats, plain, { messages_key = "messages", assistant_only_loss = true })
end, "assistant_only_loss without generation blocks", "line 1 has no assistant tokens", "{% generation %}")
os.execute("rm -rf '" .. work .. "'")
check.done("conversation dataset")
