-- Windows of a text file's tokens, for language models:
--   local ds = data.TextDataset("input.txt", {seq_len = 64, level = "char"})
--   local x, y = ds:get(1)      -- ids of tokens 1..64 and 2..65
--   ds.vocab:decode(x)          -- the text back
-- Sample i is (input, target), both int64 [seq_len]: the tokens starting
-- at token (i-1)*stride + 1, and the same shifted by one. level = "char"
-- reads UTF-8 characters, "byte" raw bytes. The vocabulary is built from
-- the file unless `vocab` (another TextDataset's) is given, so a
-- validation file shares the training file's ids. The file may be
-- gzip-compressed. Samples are views of one tensor of ids (`ds.ids`).
local core = require("accel.core")
local Vocab = require("accel.data.vocab")

local TextDataset = {}
TextDataset.__index = TextDataset

local known_options = { seq_len = true, level = true, vocab = true, stride = true }

local function positive_integer(options, key, default)
  local v = options[key]
  if v == nil then return default end
  if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then
    error(string.format("data.TextDataset: %s must be a positive integer, got %s", key, tostring(v)), 3)
  end
  return v
end

local function new(_, path, options)
  if type(path) ~= "string" then
    error("data.TextDataset: expected a file path, got a " .. type(path), 2)
  end
  options = options or {}
  for key in pairs(options) do
    if not known_options[key] then
      error("data.TextDataset: unknown option '" .. tostring(key) .. "' (known: level, seq_len, stride, vocab)", 2)
    end
  end
  local seq_len = positive_integer(options, "seq_len", 64)
  local stride = positive_integer(options, "stride", seq_len)
  local vocab = options.vocab
  if vocab ~= nil and getmetatable(vocab) ~= Vocab then
    error("data.TextDataset: vocab must be another TextDataset's vocab", 2)
  end
  local level = options.level or (vocab and vocab.level) or "char"
  local ids, handle = core.data.TextDataset(path, level, vocab and vocab.handle)
  if ids:numel() <= seq_len then
    error(string.format("data.TextDataset: '%s' has %d tokens; windows of seq_len = %d need at least %d",
                        path, ids:numel(), seq_len, seq_len + 1), 2)
  end
  local inputs, targets = core.data.windows(ids, seq_len, stride)
  return setmetatable({
    path = path,
    ids = ids,
    seq_len = seq_len,
    stride = stride,
    vocab = vocab or Vocab.wrap(handle),
    tensors = { inputs, targets },
    length = inputs:size(1),
  }, TextDataset)
end

function TextDataset:__len()
  return self.length
end

function TextDataset:get(i)
  return self.tensors[1][i], self.tensors[2][i]
end

return setmetatable(TextDataset, { __call = new })
