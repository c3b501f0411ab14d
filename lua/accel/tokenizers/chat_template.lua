-- Chat templates on tokenizers, as transformers' apply_chat_template
-- (docs/api/tokenizers.md, "Chat templates"):
--   local out = tok:apply_chat_template(messages, {add_generation_prompt = true})
--   out.input_ids, out.attention_mask            -- lists of 0-based ids, of 1s
--   tok:apply_chat_template(messages, {tokenize = false})     -- the text
--   tok:apply_chat_template(messages, {return_assistant_tokens_mask = true}).assistant_masks
-- The template is Jinja2, run by the engine's interpreter
-- (engine/chat_template/chat_template.h), sandboxed and bounded.
local core = require("accel.core")
local args = require("accel.util.args")

local chat_template = {}

-- transformers' tag for continue_final_message, and the reasoning fields it aliases.
local CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
local REASONING_FIELDS = { "reasoning_content", "thinking", "reasoning" }

local function read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end

-- A template or a table of named ones from tokenizer_config.json's value:
-- a string, or a list of {name, template}. `where` names it in errors.
local function from_config_value(value, where)
  if value == nil or value == core.json.null then return nil end
  if type(value) == "string" then return value end
  if type(value) ~= "table" then
    error(string.format("%s must be a string or a list of {name, template}, got a %s", where, type(value)), 0)
  end
  local named = {}
  for i, entry in ipairs(value) do
    if type(entry) ~= "table" or type(entry.name) ~= "string" or type(entry.template) ~= "string" then
      error(string.format("%s[%d] must be an object with a string name and template", where, i), 0)
    end
    named[entry.name] = entry.template
  end
  return named
end

-- The chat template of a checkpoint folder, as transformers finds it:
-- chat_template.jinja (with additional_chat_templates/<name>.jinja beside
-- it: then a table by name, the file's under "default"), else
-- chat_template.json's "chat_template", else tokenizer_config.json's.
-- Returns the template (a string, a table of them or nil) and, for each
-- name, the file it came from (for errors).
function chat_template.read(dir, config)
  local templates, origins = {}, {}
  local jinja = dir .. "/chat_template.jinja"
  local text = read_file(jinja)
  if text then
    templates.default, origins.default = text, jinja
  end
  local extra_dir = dir .. "/additional_chat_templates"
  for _, name in ipairs(core.formats.list_folder(extra_dir)) do
    local stem = name:match("^(.+)%.jinja$")
    local text = stem and read_file(extra_dir .. "/" .. name)
    if text then templates[stem], origins[stem] = text, extra_dir .. "/" .. name end
  end
  if next(templates) then
    if templates.default and next(templates, next(templates)) == nil then return templates.default, origins end
    return templates, origins
  end
  local json_path = dir .. "/chat_template.json"
  if read_file(json_path) then
    local t = core.json.read(json_path, 64 * 1024 * 1024)
    local value = from_config_value(t.chat_template, "'" .. json_path .. "' chat_template")
    if value then return value, setmetatable({}, { __index = function() return json_path end }) end
  end
  local config_path = dir .. "/tokenizer_config.json"
  local value = from_config_value(config and config.chat_template, "'" .. config_path .. "' chat_template")
  return value, setmetatable({}, { __index = function() return config_path end })
end

-- transformers' get_chat_template: a name among the named templates, or
-- "tool_use" when tools are given and there is one, else "default"; a
-- string that names none is a template itself.
local function choose(self, where, name, tools)
  local own = self.chat_template
  if type(own) == "table" then
    if name ~= nil and own[name] then return own[name], (self.chat_template_origins or {})[name] end
    if name == nil then
      local pick = (tools ~= nil and own.tool_use) and "tool_use" or (own.default and "default")
      if not pick then
        local names = {}
        for k in pairs(own) do names[#names + 1] = k end
        table.sort(names)
        args.error(string.format("%s: this tokenizer has several chat templates and none named 'default': pass "
                                 .. "chat_template = one of %s", where, table.concat(names, ", ")))
      end
      return own[pick], (self.chat_template_origins or {})[pick]
    end
  end
  if name ~= nil then return name, nil end  -- a template given as text
  if own == nil then
    args.error(where .. ": this tokenizer has no chat template (tokenizer_config.json has no chat_template and "
               .. "there is no chat_template.jinja): set tok.chat_template or pass chat_template")
  end
  return own, (self.chat_template_origins or {}).default
end

-- The compiled template for `source`, kept on the tokenizer by its text.
local function compiled(self, source, origin)
  self.compiled_chat_templates = self.compiled_chat_templates or setmetatable({}, { __mode = "v" })
  local t = self.compiled_chat_templates[source]
  if not t then
    t = core.chat_template.compile(source, origin and ("'" .. origin .. "'") or "chat template")
    self.compiled_chat_templates[source] = t
  end
  return t
end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

-- One conversation as transformers normalizes it: keys holding null
-- dropped, reasoning under its several names (_alias_reasoning_fields).
local function normalize(where, conversation, index)
  if type(conversation) ~= "table" or #conversation == 0 then
    args.error(string.format("%s: conversation %d must be a non-empty list of messages", where, index))
  end
  local out = {}
  for i, message in ipairs(conversation) do
    if type(message) ~= "table" then
      args.error(string.format("%s: message %d is a %s, not a table", where, i, type(message)))
    end
    local m = {}
    for k, v in pairs(message) do
      if v ~= core.json.null then m[k] = v end
    end
    local reasoning
    for _, field in ipairs(REASONING_FIELDS) do
      if reasoning == nil then reasoning = m[field] end
    end
    if reasoning ~= nil then
      if m.thinking == nil then m.thinking = reasoning end
      m.reasoning_content = reasoning
    end
    out[i] = m
  end
  return out
end

-- transformers' continue_final_message: the final message's field gets a
-- tag, the text is cut at the tag (and the spaces the template trimmed).
local function tag_final_message(where, chat, field, source)
  local last = chat[#chat]
  local final = last[field]
  if final == nil then
    args.error(string.format('%s: continue_final_message is set but the final message has no "%s" to continue',
                             where, field))
  end
  local fields = { field }
  for _, f in ipairs(REASONING_FIELDS) do
    if f == field then
      fields = {}
      for _, g in ipairs(REASONING_FIELDS) do
        if last[g] == final then fields[#fields + 1] = g end
      end
    end
  end
  local named = false
  for _, f in ipairs(fields) do named = named or source:find(f, 1, true) ~= nil end
  if not named then
    args.error(string.format('%s: continue_final_message is set to "%s" but the chat template never names it',
                             where, field))
  end
  last = copy(last)
  chat[#chat] = last
  if type(final) == "table" then
    for i = #final, 1, -1 do
      local block = final[i]
      if type(block) == "table" and block.text ~= nil then
        local blocks = copy(final)
        blocks[i] = copy(block)
        blocks[i].text = block.text .. CONTINUE_TAG
        last[field] = blocks
        return block.text
      end
    end
    args.error(where .. ": continue_final_message is set but the final message has no text to continue")
  end
  for _, f in ipairs(fields) do last[f] = last[f] .. CONTINUE_TAG end
  return final
end

local function cut_at_tag(where, text, final)
  local trimmed = tostring(final):match("^%s*(.-)%s*$")
  local tag = CONTINUE_TAG:sub(1, -2)
  if not text:find(trimmed, 1, true) or not text:find(tag, 1, true) then
    args.error(where .. ": continue_final_message is set but the final message does not appear in the text the "
               .. "chat template made (the template changes the final message)")
  end
  local at, from = nil, 1
  while true do
    local i = text:find(tag, from, true)
    if not i then break end
    at, from = i, i + 1
  end
  if text:sub(at, at + #CONTINUE_TAG - 1) == CONTINUE_TAG then return text:sub(1, at - 1) end
  return (text:sub(1, at - 1):gsub("%s+$", ""))
end

-- Writes `template` (a string or a table of named ones) into `dir` as
-- transformers' save_pretrained does: chat_template.jinja, the others as
-- additional_chat_templates/<name>.jinja. Returns the paths written.
function chat_template.save(template, dir, write_text)
  if template == nil then return {} end
  if type(template) == "string" then
    write_text(dir .. "/chat_template.jinja", template)
    return { dir .. "/chat_template.jinja" }
  end
  local written, names = {}, {}
  for name in pairs(template) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    if type(name) ~= "string" or type(template[name]) ~= "string" then
      args.error("Tokenizer:save_pretrained: tok.chat_template must be a string or a table of strings by name")
    end
    if name == "default" then
      write_text(dir .. "/chat_template.jinja", template[name])
      written[#written + 1] = dir .. "/chat_template.jinja"
    else
      -- A name is a file name here: nothing that leaves the folder.
      if not name:match("^[%w_%-][%w_%.%-]*$") then
        args.error("Tokenizer:save_pretrained: the chat template name '" .. name .. "' is not a plain file name")
      end
      if not core.formats.is_folder(dir .. "/additional_chat_templates") then
        core.formats.make_empty_folder(dir .. "/additional_chat_templates")
      end
      local path = dir .. "/additional_chat_templates/" .. name .. ".jinja"
      write_text(path, template[name])
      written[#written + 1] = path
    end
  end
  return written
end

local OPTIONS = {
  add_generation_prompt = false, continue_final_message = false, tokenize = true, return_dict = true,
  return_assistant_tokens_mask = false, tools = args.NONE, documents = args.NONE, chat_template = args.NONE,
  truncation = args.NONE, max_length = args.NONE, return_tensors = args.NONE, template_limits = args.NONE,
}
local TYPES = {
  add_generation_prompt = "boolean", continue_final_message = "boolean|string", tokenize = "boolean",
  return_dict = "boolean", return_assistant_tokens_mask = "boolean", tools = "table", documents = "table",
  chat_template = "string", truncation = "boolean", max_length = "number", return_tensors = "string",
  template_limits = "table",
}

local function rows_tensor(rows)
  local width = 0
  for _, r in ipairs(rows) do width = math.max(width, #r) end
  for _, r in ipairs(rows) do
    if #r ~= width then
      args.error("Tokenizer:apply_chat_template: return_tensors needs conversations of one length (pad them)")
    end
  end
  return core.tensor(rows, { dtype = "int64" })
end

-- tok:apply_chat_template(conversation, {add_generation_prompt, continue_final_message, tokenize, return_dict,
--   return_assistant_tokens_mask, tools, documents, chat_template, truncation, max_length, return_tensors,
--   template_limits, ...}) -- every other key is a variable the template sees, as transformers' **kwargs.
-- conversation: a list of messages, or a list of such lists (a batch).
function chat_template.apply(self, conversation, options)
  local where = "Tokenizer:apply_chat_template"
  local known, extra = {}, {}
  for k, v in pairs(options or {}) do
    if OPTIONS[k] ~= nil then known[k] = v else extra[k] = v end
  end
  local o = args.options(where, known, OPTIONS, TYPES)
  if o.template_limits then
    o.template_limits = args.options(where .. " template_limits", o.template_limits,
                                     { max_output_bytes = args.NONE, max_steps = args.NONE, max_call_depth = args.NONE },
                                     { max_output_bytes = "number", max_steps = "number", max_call_depth = "number" })
    for k, v in pairs(o.template_limits) do args.positive_integer(where, "template_limits." .. k, v) end
  end
  if not o.tokenize then o.return_dict = false end
  if o.return_assistant_tokens_mask and not o.return_dict then
    args.error(where .. ": return_assistant_tokens_mask = true needs return_dict = true and tokenize = true")
  end
  if o.continue_final_message and o.add_generation_prompt then
    args.error(where .. ": continue_final_message and add_generation_prompt do not go together: the one continues "
               .. "the final message, the other starts a new one")
  end
  if o.continue_final_message and o.return_assistant_tokens_mask then
    args.error(where .. ": continue_final_message does not go with return_assistant_tokens_mask")
  end
  if type(conversation) ~= "table" or #conversation == 0 then
    args.error(where .. ": expected a non-empty list of messages (or a list of conversations)")
  end
  local batched = type(conversation[1]) == "table" and #conversation[1] > 0  -- a message is a table of names
  local conversations = batched and conversation or { conversation }
  local source, origin = choose(self, where, o.chat_template, o.tools)
  local template = compiled(self, source, origin)
  -- transformers 5's special_tokens_map: the named tokens, not the additional ones.
  local variables = {}
  for _, name in ipairs(require("accel.tokenizers.special_tokens").NAMES) do variables[name] = self[name] end
  for k, v in pairs(extra) do variables[k] = v end
  variables.tools = o.tools or core.json.null
  variables.documents = o.documents or core.json.null
  variables.add_generation_prompt = o.add_generation_prompt
  local field = o.continue_final_message
  if field == true then field = "content" end
  local texts, spans = {}, {}
  for i, c in ipairs(conversations) do
    local chat = normalize(where, c, i)
    local final = field and tag_final_message(where, chat, field, source)
    variables.messages = chat
    local text, generation = template:render(variables, o.template_limits)
    if final then text = cut_at_tag(where, text, final) end
    texts[i], spans[i] = text, generation
  end
  if not o.tokenize then return batched and texts or texts[1] end
  local ids, masks, attention = {}, {}, {}
  for i, text in ipairs(texts) do
    ids[i] = self:encode(text, { add_special_tokens = false, truncation = o.truncation, max_length = o.max_length })
    local ones = {}
    for k = 1, #ids[i] do ones[k] = 1 end
    attention[i] = ones
    if o.return_assistant_tokens_mask then masks[i] = self.handle:assistant_mask(ids[i], spans[i]) end
  end
  local function shape(rows)
    if o.return_tensors == "pt" then return rows_tensor(rows) end
    if o.return_tensors ~= nil then args.error(where .. ': return_tensors must be "pt" or absent') end
    return batched and rows or rows[1]
  end
  if not o.return_dict then return shape(ids) end
  local out = { input_ids = shape(ids), attention_mask = shape(attention) }
  if o.return_assistant_tokens_mask then out.assistant_masks = shape(masks) end
  return out
end

return chat_template
