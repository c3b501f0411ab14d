-- accel.tokenizers.TextStreamer(tok, {skip_prompt = false, skip_special_tokens
-- = false, on_text}): transformers' TextStreamer, which generate's streamer
-- option feeds: the prompt's ids first (left out with skip_prompt), then
-- each step's new ids. It writes the text as it decodes, holding back a
-- tail that ends in an unfinished UTF-8 character (decoded as U+FFFD until
-- the next token completes it), and ends with a newline at end(). on_text
-- (text, finished) receives the text instead of io.write (stdout). One row
-- only, as transformers'.
local args = require("accel.util.args")

local TextStreamer = {}
TextStreamer.__index = TextStreamer

local replacement = "\239\191\189"  -- U+FFFD

local function new(_, tok, options)
  local where = "accel.tokenizers.TextStreamer"
  if type(tok) ~= "table" or type(tok.decode) ~= "function" then
    args.error(where .. ": expected a tokenizer (accel.tokenizers.from_pretrained) as argument 1")
  end
  local o = args.options(where, options, { skip_prompt = false, skip_special_tokens = false, on_text = args.NONE },
                         { skip_prompt = "boolean", skip_special_tokens = "boolean", on_text = "function" })
  return setmetatable({ tok = tok, o = o, ids = {}, shown = 0, prompt_seen = false }, TextStreamer)
end

function TextStreamer:emit(text, finished)
  if self.o.on_text then
    self.o.on_text(text, finished)
  else
    io.write(text, finished and "\n" or "")
    io.flush()
  end
end

-- ids: (1, n) or (n) token ids.
function TextStreamer:put(ids)
  if ids:dim() == 2 then
    if ids:size(1) ~= 1 then args.error("accel.tokenizers.TextStreamer: streams one row only, got " .. ids:size(1)) end
    ids = ids[1]
  end
  if self.o.skip_prompt and not self.prompt_seen then
    self.prompt_seen = true
    return
  end
  self.prompt_seen = true
  for _, id in ipairs(ids:totable()) do self.ids[#self.ids + 1] = id end
  local text = self.tok:decode(self.ids, { skip_special_tokens = self.o.skip_special_tokens })
  if text:sub(-#replacement) == replacement then return end  -- a character still being spelled
  if #text > self.shown then
    self:emit(text:sub(self.shown + 1), false)
    self.shown = #text
  end
end

TextStreamer["end"] = function(self)
  local text = #self.ids > 0 and self.tok:decode(self.ids, { skip_special_tokens = self.o.skip_special_tokens }) or ""
  self:emit(text:sub(self.shown + 1), true)
  self.ids, self.shown, self.prompt_seen = {}, 0, false
end

return setmetatable(TextStreamer, { __call = new })
