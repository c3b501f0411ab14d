-- accel's side of bench/tokenizers/run.sh, on one thread:
--   accel-run encode.lua --threads 1 -- DIR REPEATS
-- Encodes DIR/text.txt with DIR/tokenizer.json, no special tokens: the
-- whole text in one call (tok:encode), and its lines one call each, each
-- the best of REPEATS. Prints one line a way, "name seconds ids digest",
-- the digest as hf_encode.py computes it (FNV-1a, one step an id).
local dir, repeats = arg[1], tonumber(arg[2])
local tok = accel.tokenizers.from_file(dir .. "/tokenizer.json")
local f = assert(io.open(dir .. "/text.txt", "rb"))
local text = f:read("*a")
f:close()
local lines = {}
for line in (text .. "\n"):gmatch("(.-)\n") do lines[#lines + 1] = line end

local function digest(h, ids)
  for i = 1, #ids do
    h = bit.bxor(h, ids[i])
    h = bit.tobit(bit.lshift(h, 24) + bit.band(h, 0xFFFFFFFF) % 4294967296 * 0x193)
  end
  return h
end

local plain = { add_special_tokens = false }
local ways = {
  { "encode", function()
      local ids = tok:encode(text, plain)
      return #ids, digest(bit.tobit(0x811C9DC5), ids)
    end },
  { "encode_lines", function()
      local n, h = 0, bit.tobit(0x811C9DC5)
      for i = 1, #lines do
        local ids = tok:encode(lines[i], plain)
        n, h = n + #ids, digest(h, ids)
      end
      return n, h
    end },
}
for _, way in ipairs(ways) do
  local best, n, h = math.huge
  for _ = 1, repeats do
    local start = accel.time()
    n, h = way[2]()
    best = math.min(best, accel.time() - start)
  end
  print(string.format("%s %.4f %d %d", way[1], best, n, h % 4294967296))
end
