-- Conversational fine-tuning examples, as TRL's SFTTrainer tokenizes them:
-- the tokenizer's chat template applied (tok:apply_chat_template), and the
-- labels -100 wherever the loss skips a token.
--   read(path, keys) -> the file's JSON objects, each with its line
--   messages_example(tok, record, o)  {messages: [...]}; with
--     assistant_only_loss the labels keep the assistant's turns only (the
--     template's {% generation %} blocks, transformers' assistant masks)
--   prompt_completion_example(tok, record, o)  {prompt: [...], completion:
--     [...]}, message lists; with completion_only_loss the labels keep the
--     completion only: the tokens after the longest common prefix of the
--     prompt rendered with its generation prompt and of prompt + completion
--     (TRL's common_prefix_length)
-- An example is {ids, labels} (training_rows.lua), or nil with why when it
-- is left out (no token left to learn). record.tools (a list, or JSON text
-- of one) reaches the template as TRL passes it, record.chat_template_kwargs
-- as extra variables.
local core = require("accel.core")
local args = require("accel.util.args")

local conversations = {}

-- Every non-blank line's JSON object, {record = ..., line = n}.
function conversations.read(path, where)
  local f, why = io.open(path, "rb")
  if not f then args.error(string.format("%s: cannot read '%s': %s", where, path, tostring(why))) end
  local out, n = {}, 0
  for line in f:lines() do
    n = n + 1
    if line:find("%S") then
      local ok, value = pcall(core.json.decode, line, string.format("'%s' line %d", path, n))
      if not ok then
        f:close()
        args.error(string.format("%s: '%s' line %d is not valid JSON: %s", where, path, n, tostring(value)))
      end
      if type(value) ~= "table" then
        f:close()
        args.error(string.format("%s: '%s' line %d is not a JSON object", where, path, n))
      end
      out[#out + 1] = { record = value, line = n }
    end
  end
  f:close()
  return out
end

local function messages_at(entry, key, path, where)
  local messages = entry.record[key]
  if messages == nil then args.error(string.format("%s: '%s' line %d has no \"%s\"", where, path, entry.line, key)) end
  if type(messages) ~= "table" or #messages == 0 then
    args.error(string.format("%s: '%s' line %d: \"%s\" must be a non-empty list of messages ({\"role\": ..., "
                             .. "\"content\": ...})", where, path, entry.line, key))
  end
  for i, m in ipairs(messages) do
    if type(m) ~= "table" or type(m.role) ~= "string" then
      args.error(string.format("%s: '%s' line %d: %s[%d] is not a message with a \"role\"", where, path, entry.line,
                               key, i))
    end
  end
  return messages
end

-- The template's options for a record: its tools and extra variables.
local function template_options(entry, extra)
  local o = {}
  local kwargs = entry.record.chat_template_kwargs
  if type(kwargs) == "table" then for k, v in pairs(kwargs) do o[k] = v end end
  local tools = entry.record.tools
  if type(tools) == "string" then tools = core.json.decode(tools, "tools") end
  if tools ~= nil and tools ~= core.json.null then o.tools = tools end
  for k, v in pairs(extra) do o[k] = v end
  o.tokenize, o.return_dict = true, true
  return o
end

local function render(tok, messages, entry, extra)
  local out = tok:apply_chat_template(messages, template_options(entry, extra))
  return out.input_ids, out.assistant_masks
end

local function labels_of(ids, keep)
  local labels = {}
  for j, id in ipairs(ids) do labels[j] = keep(j) and id or -100 end
  return labels
end

local function has_label(labels)
  for _, l in ipairs(labels) do if l ~= -100 then return true end end
  return false
end

local function no_assistant_tokens(path, line)
  return string.format("'%s' line %d has no assistant tokens: assistant_only_loss needs a chat template that marks "
                       .. "the assistant's turns with {%% generation %%} ... {%% endgeneration %%}", path, line)
end

-- The example of messages[1..k].
local function messages_prefix(tok, messages, k, entry, o)
  local prefix = {}
  for i = 1, k do prefix[i] = messages[i] end
  local ids, masks = render(tok, prefix, entry, { return_assistant_tokens_mask = o.assistant_only_loss })
  if o.assistant_only_loss and masks == nil then
    args.error("the tokenizer's apply_chat_template returned no assistant_masks")
  end
  local labels = labels_of(ids, function(j) return not o.assistant_only_loss or masks[j] == 1 end)
  return { ids = ids, labels = labels }
end

function conversations.messages_example(tok, entry, o)
  local messages = messages_at(entry, o.messages_key, o.path, o.where)
  local example = messages_prefix(tok, messages, #messages, entry, o)
  if o.assistant_only_loss and not has_label(example.labels) then
    args.error(o.where .. ": " .. no_assistant_tokens(o.path, entry.line))
  end
  if o.truncation_mode == "whole_turns" and #example.ids > o.max_length then
    -- The longest run of whole messages that fits and ends with the assistant.
    example = nil
    for k = #messages - 1, 1, -1 do
      if messages[k].role == "assistant" then
        local shorter = messages_prefix(tok, messages, k, entry, o)
        if #shorter.ids <= o.max_length then
          example = shorter
          break
        end
      end
    end
    if not example then return nil, "no assistant turn fits in max_length with the turns before it" end
  end
  return example
end

function conversations.prompt_completion_example(tok, entry, o)
  local prompt = messages_at(entry, o.prompt_key, o.path, o.where)
  local completion = messages_at(entry, o.completion_key, o.path, o.where)
  local prompt_ids = render(tok, prompt, entry, { add_generation_prompt = true })
  local joined = {}
  for _, m in ipairs(prompt) do joined[#joined + 1] = m end
  for _, m in ipairs(completion) do joined[#joined + 1] = m end
  local ids, masks = render(tok, joined, entry, { return_assistant_tokens_mask = o.assistant_only_loss })
  local shared = conversations.common_prefix_length(prompt_ids, ids)
  if o.assistant_only_loss and (masks == nil or not has_label(labels_of(ids, function(j) return masks[j] == 1 end))) then
    args.error(o.where .. ": " .. no_assistant_tokens(o.path, entry.line))
  end
  local labels = labels_of(ids, function(j)
    return (not o.completion_only_loss or j > shared) and (not o.assistant_only_loss or masks[j] == 1)
  end)
  return { ids = ids, labels = labels }
end

-- How many ids lists a and b share from their start (TRL's common_prefix_length).
function conversations.common_prefix_length(a, b)
  local n = 0
  while n < #a and n < #b and a[n + 1] == b[n + 1] do n = n + 1 end
  return n
end

-- Whether a prompt-completion record is conversational: its prompt a list.
function conversations.is_conversational(entry, key)
  return type(entry.record[key]) == "table"
end

return conversations
