-- A text data set's vocabulary (see engine/data/vocabulary.h): tokens and
-- their 1-based ids.
--   vocab.vocab_size, vocab.level ("char" or "byte"), vocab.tokens (by id)
--   vocab:encode("to be") -> int64 tensor of ids
--   vocab:decode(ids) -> string, ids a 1-D integer tensor or a table
-- encode and decode also work called with a dot (vocab.encode("to be")).
local core = require("accel.core")

local Vocab = {}
Vocab.__index = Vocab

-- Wraps the engine's vocabulary handle.
function Vocab.wrap(handle)
  local vocab = setmetatable({ handle = handle, level = handle:level(), vocab_size = handle:size(),
                               tokens = handle:tokens() }, Vocab)
  -- Closures rather than shared methods, so vocab.encode(s) finds its vocab.
  function vocab.encode(a, b)
    local text = a
    if a == vocab then text = b end
    if type(text) ~= "string" then
      error("vocab:encode: expected a string, got a " .. type(text), 2)
    end
    return handle:encode(text, "text")
  end
  function vocab.decode(a, b)
    local ids = a
    if a == vocab then ids = b end
    if type(ids) == "table" then ids = core.tensor(ids, { dtype = "int64" }) end
    if type(ids) ~= "userdata" then
      error("vocab:decode: expected a tensor or a table of ids, got a " .. type(ids), 2)
    end
    return handle:decode(ids)
  end
  return vocab
end

return Vocab
