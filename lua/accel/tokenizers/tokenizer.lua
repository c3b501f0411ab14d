-- A tokenizer as recipes use it, modelled on transformers' tokenizers:
--   local tok = accel.tokenizers.from_pretrained("llama")
--   tok:encode("Hello")                       -- {1, 15043}: the file's ids, 0-based
--   tok:decode(ids, {skip_special_tokens = true})
--   local b = tok({"a", "b c"}, {padding = true, padding_side = "left"})
--   b.input_ids, b.attention_mask             -- int64 [2, L], as the models take them
-- Ids are the tokenizer file's own, from 0, everywhere here (DESIGN.md
-- says why): config.json's eos_token_id and pre-tokenized data sets hold
-- the same ids, and accel.models take them as they are.
local core = require("accel.core")
local args = require("accel.util.args")
local special_tokens = require("accel.tokenizers.special_tokens")
local chat_template = require("accel.tokenizers.chat_template")
local call_defaults = require("accel.tokenizers.call_defaults")

local Tokenizer = {}
Tokenizer.__index = Tokenizer

-- Builds the Lua tokenizer around `handle` (accel.core.tokenizers).
-- `info`: kind ("tokenizer.json" or "tokenizer.model"), file (its path),
-- config (tokenizer_config.json's table or nil), specials (from
-- special_tokens.from_configs), file_pad_token / file_pad_id,
-- chat_template (a string, a table of named ones, or nil) and
-- chat_template_origins (the file of each, for errors).
function Tokenizer.wrap(handle, info)
  local config = info.config or {}
  local defaults = info.defaults or call_defaults.read(nil, info.file)
  local self = setmetatable({
    handle = handle,
    kind = info.kind,
    file = info.file,
    config = config,
    config_floats = info.config_floats,
    vocab_size = handle:vocab_size(false),
    padding_side = defaults.padding_side,
    truncation_side = defaults.truncation_side,
    model_max_length = defaults.model_max_length,
    -- Visible and settable, as transformers' tok.chat_template.
    chat_template = info.chat_template,
    chat_template_origins = info.chat_template_origins,
  }, Tokenizer)
  local specials = info.specials or { additional_special_tokens = {} }
  if specials.pad_token == nil and info.file_pad_token then specials.pad_token = info.file_pad_token end
  for _, name in ipairs(special_tokens.NAMES) do
    local content = specials[name]
    if content then
      self[name] = content
      self[name .. "_id"] = handle:token_to_id(content)
    end
  end
  if self.pad_token and self.pad_token_id == nil and info.file_pad_token == self.pad_token then
    self.pad_token_id = info.file_pad_id
  end
  self.additional_special_tokens = specials.additional_special_tokens
  -- Segments are returned where transformers returns them: BERT-like tokenizers.
  local names = config.model_input_names
  if type(names) == "table" then
    self.returns_token_type_ids = false
    for _, n in ipairs(names) do
      if n == "token_type_ids" then self.returns_token_type_ids = true end
    end
  else
    self.returns_token_type_ids = type(config.tokenizer_class) == "string" and
                                  config.tokenizer_class:match("^Bert") ~= nil
  end
  return self
end

-- Every special token's content, and their ids (transformers'
-- all_special_tokens and all_special_ids): the named ones, the additional
-- ones and the file's added tokens marked special.
function Tokenizer:all_special_tokens()
  local seen, out = {}, {}
  local function add(content)
    if content and not seen[content] then
      seen[content] = true
      out[#out + 1] = content
    end
  end
  for _, name in ipairs(special_tokens.NAMES) do add(self[name]) end
  for _, content in ipairs(self.additional_special_tokens) do add(content) end
  for _, t in ipairs(self.handle:added_tokens()) do
    if t.special then add(t.content) end
  end
  return out
end

function Tokenizer:all_special_ids()
  local out = {}
  for _, content in ipairs(self:all_special_tokens()) do
    local id = self.handle:token_to_id(content)
    if id then out[#out + 1] = id end
  end
  return out
end

-- The size of the model's vocabulary, or with the added tokens it lacks.
function Tokenizer:get_vocab_size(options)
  local o = args.options("Tokenizer:get_vocab_size", options, { with_added_tokens = true },
                         { with_added_tokens = "boolean" })
  return self.handle:vocab_size(o.with_added_tokens)
end

function Tokenizer:token_to_id(token)
  if type(token) ~= "string" then args.error("Tokenizer:token_to_id: expected a token string, got a " .. type(token)) end
  return self.handle:token_to_id(token)
end

function Tokenizer:id_to_token(id)
  if type(id) ~= "number" then args.error("Tokenizer:id_to_token: expected an id, got a " .. type(id)) end
  return self.handle:id_to_token(id)
end

-- The truncation and padding a call asks for, settled as transformers
-- settles them. Returns the engine's options table.
local function batch_options(self, where, o)
  local engine = { add_special_tokens = o.add_special_tokens }
  local padding = o.padding
  if padding == true then padding = "longest" end
  if padding == false or padding == "do_not_pad" then padding = nil end
  if padding ~= nil and padding ~= "longest" and padding ~= "max_length" then
    args.error(string.format('%s: padding must be true, false, "longest", "max_length" or "do_not_pad", got %s',
                             where, tostring(o.padding)))
  end
  local truncation = o.truncation
  -- As transformers: max_length alone (no padding) asks for truncation.
  if truncation == nil and o.max_length ~= nil and padding == nil then truncation = true end
  if truncation == true then truncation = "longest_first" end
  if truncation == false or truncation == "do_not_truncate" then truncation = nil end
  if truncation ~= nil and truncation ~= "longest_first" and truncation ~= "only_first" and
     truncation ~= "only_second" then
    args.error(string.format('%s: truncation must be true, false, "longest_first", "only_first", "only_second" or '
                             .. '"do_not_truncate", got %s', where, tostring(o.truncation)))
  end
  local max_length = o.max_length
  if max_length ~= nil then max_length = args.positive_integer(where, "max_length", max_length) end
  if max_length == nil and (truncation ~= nil or padding == "max_length") then
    max_length = self.model_max_length
    if max_length == nil then
      args.error(string.format("%s: %s needs max_length: the tokenizer's config gives no model_max_length", where,
                               truncation and "truncation" or 'padding = "max_length"'))
    end
  end
  for _, side in ipairs({ "padding_side", "truncation_side" }) do
    if o[side] ~= "left" and o[side] ~= "right" then
      args.error(string.format('%s: %s must be "left" or "right", got %s', where, side, tostring(o[side])))
    end
  end
  if truncation then
    engine.max_length = max_length
    engine.truncation_strategy = truncation
    engine.truncation_side = o.truncation_side
  end
  if padding then
    if self.pad_token_id == nil then
      args.error(string.format("%s: padding needs a pad token, and this tokenizer's config names none (%s): set "
                               .. "tok.pad_token_id (for example to tok.eos_token_id) first", where,
                               self.pad_token and ("its pad_token '" .. self.pad_token .. "' is not in the vocabulary")
                               or "no pad_token"))
    end
    engine.padding = true
    engine.pad_id = self.pad_token_id
    engine.padding_side = o.padding_side
    if padding == "max_length" then engine.pad_length = max_length end
    if o.pad_to_multiple_of ~= nil then
      engine.pad_to_multiple_of = args.positive_integer(where, "pad_to_multiple_of", o.pad_to_multiple_of)
    end
  end
  return engine
end

local function string_list(where, name, texts)
  if type(texts) == "string" then return { texts } end
  if type(texts) ~= "table" or #texts == 0 then
    args.error(string.format("%s: %s must be a string or a non-empty list of strings, got %s", where, name,
                             type(texts) == "table" and "an empty table" or ("a " .. type(texts))))
  end
  for i, t in ipairs(texts) do
    if type(t) ~= "string" then
      args.error(string.format("%s: %s[%d] is a %s, not a string", where, name, i, type(t)))
    end
  end
  return texts
end

-- tok(texts, {padding, padding_side, truncation, truncation_side, max_length,
--   pad_to_multiple_of, add_special_tokens, return_attention_mask,
--   return_token_type_ids, text_pair})
-- -> {input_ids = int64 [#texts, L], attention_mask = int64 [#texts, L]
--     (and token_type_ids)}. One string is a batch of one.
function Tokenizer:__call(texts, options)
  local where = "Tokenizer"
  local o = args.options(where, options, {
    padding = false, padding_side = self.padding_side, truncation = args.NONE,
    truncation_side = self.truncation_side, max_length = args.NONE, pad_to_multiple_of = args.NONE,
    add_special_tokens = true, return_attention_mask = true, return_token_type_ids = self.returns_token_type_ids,
    text_pair = args.NONE,
  }, { padding = "boolean|string", truncation = "boolean|string", max_length = "number",
       pad_to_multiple_of = "number", add_special_tokens = "boolean", return_attention_mask = "boolean",
       return_token_type_ids = "boolean", text_pair = "string|table" })
  texts = string_list(where, "texts", texts)
  local pairs_ = o.text_pair and string_list(where, "text_pair", o.text_pair) or nil
  if pairs_ and #pairs_ ~= #texts then
    args.error(string.format("%s: text_pair has %d texts, texts has %d", where, #pairs_, #texts))
  end
  local engine = batch_options(self, where, o)
  local input_ids, attention_mask, token_type_ids = self.handle:encode_batch(texts, pairs_, engine)
  local out = { input_ids = input_ids }
  if o.return_attention_mask then out.attention_mask = attention_mask end
  if o.return_token_type_ids then out.token_type_ids = token_type_ids end
  return out
end

-- tok:encode(text, {add_special_tokens, text_pair, truncation, max_length,
-- truncation_side}) -> a list of ids (numbers, 0-based).
function Tokenizer:encode(text, options)
  local where = "Tokenizer:encode"
  local o = args.options(where, options, {
    add_special_tokens = true, text_pair = args.NONE, truncation = args.NONE, max_length = args.NONE,
    truncation_side = self.truncation_side,
  }, { add_special_tokens = "boolean", text_pair = "string", truncation = "boolean|string", max_length = "number" })
  if type(text) ~= "string" then args.error(where .. ": expected a string, got a " .. type(text)) end
  o.padding = false
  o.padding_side = self.padding_side
  local engine = batch_options(self, where, o)
  engine.pair = o.text_pair
  return (self.handle:encode(text, engine))
end

-- The tokens of a text's ids (transformers' tokenize: no special tokens added).
function Tokenizer:tokenize(text, options)
  local ids = self:encode(text, options or { add_special_tokens = false })
  return self:convert_ids_to_tokens(ids)
end

function Tokenizer:convert_ids_to_tokens(ids)
  if type(ids) == "number" then return self.handle:id_to_token(ids) end
  local out = {}
  for i, id in ipairs(type(ids) == "table" and ids or ids:totable()) do out[i] = self.handle:id_to_token(id) end
  return out
end

function Tokenizer:convert_tokens_to_ids(tokens)
  if type(tokens) == "string" then return self.handle:token_to_id(tokens) end
  local out = {}
  for i, t in ipairs(tokens) do out[i] = self.handle:token_to_id(t) end
  return out
end

-- transformers' clean_up_tokenization.
local function clean_up(text)
  for _, rule in ipairs({ { " .", "." }, { " ?", "?" }, { " !", "!" }, { " ,", "," }, { " ' ", "'" },
                          { " n't", "n't" }, { " 'm", "'m" }, { " 's", "'s" }, { " 've", "'ve" },
                          { " 're", "'re" } }) do
    local from, to = rule[1], rule[2]
    local start = 1
    local parts = {}
    while true do
      local i, j = text:find(from, start, true)
      if not i then break end
      parts[#parts + 1] = text:sub(start, i - 1) .. to
      start = j + 1
    end
    parts[#parts + 1] = text:sub(start)
    text = table.concat(parts)
  end
  return text
end

local decode_defaults = { skip_special_tokens = false, clean_up_tokenization_spaces = false }
local decode_types = { skip_special_tokens = "boolean", clean_up_tokenization_spaces = "boolean" }

-- tok:decode(ids, {skip_special_tokens, clean_up_tokenization_spaces}) -> text.
-- ids: a list of ids or a 1-D integer tensor.
function Tokenizer:decode(ids, options)
  local o = args.options("Tokenizer:decode", options, decode_defaults, decode_types)
  local text = self.handle:decode(ids, o.skip_special_tokens)
  return o.clean_up_tokenization_spaces and clean_up(text) or text
end

-- tok:batch_decode(ids, options) -> {texts}: one text per row of a 2-D
-- integer tensor (what model:generate returns), or per list.
function Tokenizer:batch_decode(ids, options)
  local o = args.options("Tokenizer:batch_decode", options, decode_defaults, decode_types)
  local texts = self.handle:decode_batch(ids, o.skip_special_tokens)
  if o.clean_up_tokenization_spaces then
    for i, t in ipairs(texts) do texts[i] = clean_up(t) end
  end
  return texts
end

-- tok:apply_chat_template(messages, options): chat_template.lua.
Tokenizer.apply_chat_template = chat_template.apply

local function copy_file(from, to)
  local src = assert(io.open(from, "rb"))
  local bytes = src:read("*a")
  src:close()
  local dst, why = io.open(to, "wb")
  if not dst then args.error("Tokenizer:save_pretrained: cannot write '" .. to .. "': " .. tostring(why)) end
  dst:write(bytes)
  dst:close()
end

local function write_text(path, text)
  local f, why = io.open(path, "wb")
  if not f then args.error("Tokenizer:save_pretrained: cannot write '" .. path .. "': " .. tostring(why)) end
  f:write(text)
  f:close()
end

-- Writes the tokenizer file as it was read (tokenizer.json or
-- tokenizer.model), tokenizer_config.json (the one read, with this
-- tokenizer's special tokens and sides) and special_tokens_map.json into
-- `dir` (made if missing). Returns the paths written.
function Tokenizer:save_pretrained(dir)
  if type(dir) ~= "string" then args.error("Tokenizer:save_pretrained: expected a folder path, got a " .. type(dir)) end
  os.execute("mkdir -p '" .. dir:gsub("'", "'\\''") .. "'")
  local file = dir .. "/" .. (self.kind == "tokenizer.model" and "tokenizer.model" or "tokenizer.json")
  copy_file(self.file, file)
  local config = {}
  for k, v in pairs(self.config) do config[k] = v end
  local map = {}
  for _, name in ipairs(special_tokens.NAMES) do
    if self[name] then
      config[name] = self[name]
      map[name] = self[name]
    end
  end
  if #self.additional_special_tokens > 0 then
    config.additional_special_tokens = self.additional_special_tokens
    map.additional_special_tokens = self.additional_special_tokens
  end
  config.padding_side = self.padding_side
  config.truncation_side = self.truncation_side
  config.model_max_length = self.model_max_length or config.model_max_length
  -- As transformers 5: the template in chat_template.jinja (named ones
  -- beside it in additional_chat_templates/), none in the config.
  config.chat_template = nil
  local written = chat_template.save(self.chat_template, dir, write_text)
  local config_path, map_path = dir .. "/tokenizer_config.json", dir .. "/special_tokens_map.json"
  write_text(config_path, core.json.encode(config, self.config_floats))
  write_text(map_path, core.json.encode(map))
  local paths = { file, config_path, map_path }
  for _, path in ipairs(written) do paths[#paths + 1] = path end
  return paths
end

return Tokenizer
