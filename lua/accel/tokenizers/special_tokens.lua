-- The special tokens and call defaults of a tokenizer folder, as
-- transformers reads them: tokenizer_config.json, then
-- special_tokens_map.json over it (its values win). A token may be written
-- as a string or as an AddedToken object ({"content": ..., ...}).
local core = require("accel.core")

local special_tokens = {}

-- The attributes transformers knows by name, in its order.
special_tokens.NAMES = { "bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token" }

-- The JSON object in `path`, or nil when there is no such file.
function special_tokens.read_json(path)
  -- Not opened to see whether it exists: a FIFO would block that forever.
  if core.formats.file_kind(path) == "missing" then return nil end
  return core.json.read(path, 64 * 1024 * 1024)
end

-- A token as a config writes it: its content, or nil.
local function content_of(value, where)
  if value == nil or value == core.json.null then return nil end
  if type(value) == "string" then return value end
  if type(value) == "table" and type(value.content) == "string" then return value.content end
  error(string.format("%s is neither a string nor an object with a \"content\"", where), 0)
end

-- {bos_token = "<s>", ..., additional_special_tokens = {...}} from the
-- configs (either may be nil). `folder` names the files in errors.
function special_tokens.from_configs(config, map, folder)
  local out = { additional_special_tokens = {} }
  for _, source in ipairs({ { config, "tokenizer_config.json" }, { map, "special_tokens_map.json" } }) do
    local t, file = source[1], source[2]
    if t then
      for _, name in ipairs(special_tokens.NAMES) do
        if t[name] ~= nil then
          out[name] = content_of(t[name], string.format("'%s/%s': %s", folder, file, name))
        end
      end
      local extra = t.additional_special_tokens
      if type(extra) == "table" then
        out.additional_special_tokens = {}
        for i, value in ipairs(extra) do
          out.additional_special_tokens[i] =
            content_of(value, string.format("'%s/%s': additional_special_tokens[%d]", folder, file, i))
        end
      end
    end
  end
  return out
end

-- The contents tokenizer_config.json's added_tokens_decoder marks special.
function special_tokens.decoder_specials(config)
  local out = {}
  if type(config) == "table" and type(config.added_tokens_decoder) == "table" then
    for _, token in pairs(config.added_tokens_decoder) do
      if type(token) == "table" and token.special == true and type(token.content) == "string" then
        out[#out + 1] = token.content
      end
    end
    table.sort(out)
  end
  return out
end

return special_tokens
