-- accel.tokenizers: the tokenizers of pretrained checkpoints (docs/api/tokenizers.md).
--   accel.tokenizers.from_pretrained(dir)   tokenizer.json, or tokenizer.model alone,
--                                           with tokenizer_config.json and special_tokens_map.json
--                                           and the chat template (chat_template.jinja or the config's)
--   accel.tokenizers.from_file(path)        a tokenizer.json by itself
--   accel.tokenizers.TokenizedDataset(path, tok, options)
--                                           a text or JSON Lines file as int64 rows for training
--   accel.tokenizers.TextStreamer(tok, options)
--                                           generate's streamer: the text written as it decodes
--   accel.tokenizers.sentencepiece_available() -> bool, why
-- Ids are the tokenizer file's own, 0-based (tokenizer.lua says why).
local core = require("accel.core")
local args = require("accel.util.args")
local Tokenizer = require("accel.tokenizers.tokenizer")
local special_tokens = require("accel.tokenizers.special_tokens")
local chat_template = require("accel.tokenizers.chat_template")
local call_defaults = require("accel.tokenizers.call_defaults")

local tokenizers = {}
tokenizers.Tokenizer = Tokenizer
tokenizers.TokenizedDataset = require("accel.tokenizers.tokenized_dataset")
tokenizers.TextStreamer = require("accel.tokenizers.text_streamer")
-- Whether this build reads tokenizer.model files, and why not.
tokenizers.sentencepiece_available = core.tokenizers.sentencepiece_available

-- Whether there is something at `path`, found without opening it: a FIFO
-- there would block io.open forever; the reader refuses it, naming it.
local function exists(path)
  return core.formats.file_kind(path) ~= "missing"
end

-- The tokenizer of a checkpoint folder: tokenizer.json when there is one
-- (its ids are Hugging Face tokenizers'), else tokenizer.model through
-- SentencePiece; the configs beside it give the special tokens and defaults.
function tokenizers.from_pretrained(dir, options)
  if type(dir) ~= "string" then
    args.error("accel.tokenizers.from_pretrained: expected a folder path, got a " .. type(dir))
  end
  args.options("accel.tokenizers.from_pretrained", options, {})
  dir = dir:gsub("/+$", "")
  local config, config_floats = special_tokens.read_json(dir .. "/tokenizer_config.json")
  local map = special_tokens.read_json(dir .. "/special_tokens_map.json")
  local ok, specials = pcall(special_tokens.from_configs, config, map, dir)
  if not ok then args.error("accel.tokenizers.from_pretrained: " .. specials) end
  local ok_defaults, defaults = pcall(call_defaults.read, config, dir .. "/tokenizer_config.json")
  if not ok_defaults then args.error("accel.tokenizers.from_pretrained: " .. defaults) end
  local json_path, model_path = dir .. "/tokenizer.json", dir .. "/tokenizer.model"
  local ok_template, template, origins = pcall(chat_template.read, dir, config)
  if not ok_template then args.error("accel.tokenizers.from_pretrained: " .. template) end
  if exists(json_path) then
    local handle, pad_token, pad_id = core.tokenizers.from_file(json_path)
    return Tokenizer.wrap(handle, { kind = "tokenizer.json", file = json_path, config = config,
                                    config_floats = config_floats, specials = specials, defaults = defaults,
                                    file_pad_token = pad_token, file_pad_id = pad_id,
                                    chat_template = template, chat_template_origins = origins })
  end
  if exists(model_path) then
    config = config or {}
    local named = special_tokens.decoder_specials(config)
    for _, name in ipairs(special_tokens.NAMES) do named[#named + 1] = specials[name] end
    for _, content in ipairs(specials.additional_special_tokens) do named[#named + 1] = content end
    local handle, model_specials = core.tokenizers.from_sentencepiece(model_path, {
      add_bos_token = config.add_bos_token ~= false,
      add_eos_token = config.add_eos_token == true,
      special_tokens = named,
    })
    -- The model's own pieces for the tokens the configs leave out.
    for name, piece in pairs(model_specials) do
      if specials[name] == nil then specials[name] = piece end
    end
    return Tokenizer.wrap(handle, { kind = "tokenizer.model", file = model_path, config = config,
                                    config_floats = config_floats, specials = specials, defaults = defaults,
                                    chat_template = template, chat_template_origins = origins })
  end
  args.error(string.format("accel.tokenizers.from_pretrained: '%s' has neither tokenizer.json nor tokenizer.model",
                           dir))
end

-- A tokenizer.json by itself: no config, so no special token names beyond
-- the file's (its added tokens are found in text and skipped by
-- skip_special_tokens all the same).
function tokenizers.from_file(path, options)
  if type(path) ~= "string" then
    args.error("accel.tokenizers.from_file: expected a tokenizer.json path, got a " .. type(path))
  end
  args.options("accel.tokenizers.from_file", options, {})
  local handle, pad_token, pad_id = core.tokenizers.from_file(path)
  return Tokenizer.wrap(handle, { kind = "tokenizer.json", file = path, file_pad_token = pad_token,
                                  file_pad_id = pad_id })
end

return tokenizers
