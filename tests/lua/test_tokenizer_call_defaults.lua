-- The call defaults of a downloaded tokenizer_config.json, as transformers
-- reads them: model_max_length (or its older name max_len) is what
-- truncation = true cuts to when a call gives no max_length, 1e30 or null
-- means none, and a `max_length` key is not read (transformers ignores
-- it); padding_side and truncation_side are "left" or "right". A field of
-- the wrong kind is refused when the folder is loaded, naming the file and
-- the key, not at the first call.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local read = dofile(arg[0]:match("(.*/)") .. "helpers/read_file.lua")
local core = require("accel.core")
local tokenizers = accel.tokenizers

local fixture = arg[0]:match("(.*/)") .. "../tokenizers/fixtures/wordpiece"
local work = os.tmpname()
os.remove(work)
core.formats.make_empty_folder(work)
local function write(name, text)
  local f = assert(io.open(work .. "/" .. name, "wb"))
  f:write(text)
  f:close()
end
write("tokenizer.json", read(fixture .. "/tokenizer.json"))

-- The fixture's tokenizer with tokenizer_config.json `fields` (JSON text of
-- an object's members).
local function with_config(fields)
  write("tokenizer_config.json", '{"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", '
        .. '"sep_token": "[SEP]"' .. (fields ~= "" and ", " .. fields or "") .. "}")
  return tokenizers.from_pretrained(work)
end
local text = ("hello world "):rep(10)

local tok = with_config('"model_max_length": 5')
check.equal(tok.model_max_length, 5, "model_max_length read")
check.equal(#tok:encode(text, { truncation = true }), 5, "truncation = true cuts to model_max_length")
check.equal(tok(text, { truncation = true }).input_ids:size(2), 5, "so does a call on a batch")
check.equal(#tok:encode(text, { truncation = true, max_length = 3 }), 3, "a call's max_length wins")
tok = with_config('"max_len": 4')
check.equal(tok.model_max_length, 4, "max_len, model_max_length's older name")
check.equal(#tok:encode(text, { truncation = true }), 4, "truncation cuts to it")
tok = with_config('"model_max_length": 6, "max_len": 4')
check.equal(tok.model_max_length, 6, "model_max_length before max_len, as transformers")
for _, none in ipairs({ '"model_max_length": 1e30', '"model_max_length": null', '"max_length": 4' }) do
  tok = with_config(none)
  check.equal(tok.model_max_length, nil, none .. ": no limit")
  check.equal(#tok:encode(text), 22, none .. ": nothing cut without truncation")
  check.raises(function() tok:encode(text, { truncation = true }) end, none .. ": truncation asks for a length",
               "needs max_length: the tokenizer's config gives no model_max_length")
end
tok = with_config('"padding_side": "left", "truncation_side": "left"')
check.equal(tok.padding_side, "left", "padding_side read")
check.near(tok:encode("hello world the", { truncation = true, max_length = 2, add_special_tokens = false }),
           { tok:token_to_id("world"), tok:token_to_id("the") }, 0, "truncation_side = left keeps the end")

for _, case in ipairs({
  { '"model_max_length": "512"', "'model_max_length' must be a whole number of at least 1", 'got "512"' },
  { '"model_max_length": -3', "'model_max_length' must be a whole number", "got -3" },
  { '"model_max_length": 0', "'model_max_length' must be a whole number", "got 0" },
  { '"model_max_length": 4.5', "'model_max_length' must be a whole number", "got 4.5" },
  { '"model_max_length": [4]', "'model_max_length' must be a whole number", "got a list" },
  { '"max_len": true', "'max_len' must be a whole number", "got true" },
  { '"padding_side": "middle"', "'padding_side' must be \"left\" or \"right\"", 'got "middle"' },
  { '"truncation_side": 1', "'truncation_side' must be \"left\" or \"right\"", "got 1" },
}) do
  check.raises(function() with_config(case[1]) end, "tokenizer_config.json with " .. case[1],
               "accel.tokenizers.from_pretrained: '" .. work .. "/tokenizer_config.json': ", case[2], case[3])
end

core.formats.remove_folder(work)
check.done("test_tokenizer_call_defaults")
