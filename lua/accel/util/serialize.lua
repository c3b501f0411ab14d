-- Lua values as bytes and back: checkpoint value files (the Accelerator's
-- state, schedulers, loader positions, registered objects) and the objects
-- ranks exchange (Accelerator:gather_object). Handles nil, booleans, numbers
-- (inf, NaN and -0 too, bit for bit), strings of any bytes, tables without
-- cycles whose keys are booleans, numbers or strings, and tensors (dtype,
-- shape and every value, int64 beyond 2^53 included).
--
-- These bytes may come from a file or a peer nobody checked, so reading them
-- only ever builds data: no Lua chunk is loaded, every count is checked
-- against the bytes that remain (a few bytes cannot ask for gigabytes), and
-- tables nest at most max_depth deep. LuaJIT's own string.buffer decoder is
-- not used because it yields cdata and sizes its tables by the counts it reads.
--
-- The format, all little-endian: the magic "accel-value 1\n", then one value:
--   'n' nil   'f' false   't' true
--   'd' a double (8 bytes)
--   's' length, then the bytes
--   '{' entry count, then key and value of each entry, keys in sorted order
--   'T' dtype name (as a string without its tag), dimension count, each
--       size, then the elements in row-major order: 1 byte per bool, 8 per
--       float64 (double) and int64 (two's complement), 4 per other float
--       type (float) and per other integer type (int32)
-- Counts, lengths and sizes are unsigned LEB128 varints of at most 8 bytes.
-- Anything else (older text, code) is refused, never run.
local ffi = require("ffi")
local core = require("accel.core")

local ck = core.formats

local serialize = {}

serialize.magic = "accel-value 1\n"
-- Deeper tables are refused when written and when read.
serialize.max_depth = 100
local max_dims = 64
local max_count = 2 ^ 53

-- How each dtype's elements are stored: the little-endian type written,
-- bytes per element, and for types stored wider, the range a value read
-- back must lie in. The engine copies whole tensors to and from these bytes
-- (ck.value_tensor_bytes, ck.value_tensor): no element passes through Lua.
local element = {
  float64 = { "float64", 8 },
  float32 = { "float32", 4 },
  float16 = { "float32", 4 },
  bfloat16 = { "float32", 4 },
  int64 = { "int64", 8 },
  int32 = { "int32", 4 },
  int16 = { "int32", 4, -32768, 32767 },
  int8 = { "int32", 4, -128, 127 },
  uint8 = { "int32", 4, 0, 255 },
  bool = { "uint8", 1, 0, 1 },
}

if not ffi.abi("le") then error("accel.serialize: value files are little-endian; this machine is not", 0) end

-- Writing ----------------------------------------------------------------

local double_box = ffi.new("double[1]")

local function varint(n)
  local bytes = {}
  repeat
    local low = n % 128
    n = (n - low) / 128
    bytes[#bytes + 1] = low + (n > 0 and 128 or 0)
  until n == 0
  return string.char(unpack(bytes))
end
-- The format's counts, for tests that craft value bytes by hand.
serialize.varint = varint

local is_tensor = core.is_tensor

local key_rank = { boolean = 1, number = 2, string = 3 }

-- Booleans (false first), then numbers, then strings: the same bytes for
-- the same table on every rank and in every run.
local function key_order(a, b)
  local ra, rb = key_rank[type(a)], key_rank[type(b)]
  if ra ~= rb then return ra < rb end
  if ra == 1 then return not a and b end
  return a < b
end

local function encode_tensor(t, out)
  local dtype = t.dtype
  local kind = element[dtype]
  if not kind then error("cannot serialise a tensor of dtype " .. tostring(dtype), 0) end
  local sizes = t:size()
  out[#out + 1] = "T" .. varint(#dtype) .. dtype .. varint(#sizes)
  for _, n in ipairs(sizes) do out[#out + 1] = varint(n) end
  if t:numel() > 0 then out[#out + 1] = ck.value_tensor_bytes(t, kind[1]) end
end

local function encode(value, out, active, depth)
  local kind = type(value)
  if kind == "nil" then
    out[#out + 1] = "n"
  elseif kind == "boolean" then
    out[#out + 1] = value and "t" or "f"
  elseif kind == "number" then
    double_box[0] = value
    out[#out + 1] = "d" .. ffi.string(double_box, 8)
  elseif kind == "string" then
    out[#out + 1] = "s" .. varint(#value)
    out[#out + 1] = value
  elseif kind == "table" then
    if active[value] then error("cannot serialise a table that contains itself", 0) end
    if depth >= serialize.max_depth then
      error("cannot serialise tables nested more than " .. serialize.max_depth .. " deep", 0)
    end
    active[value] = true
    local keys = {}
    for k in pairs(value) do
      if not key_rank[type(k)] then error("cannot serialise a table with a " .. type(k) .. " key", 0) end
      keys[#keys + 1] = k
    end
    table.sort(keys, key_order)
    out[#out + 1] = "{" .. varint(#keys)
    for _, k in ipairs(keys) do
      encode(k, out, active, depth + 1)
      encode(value[k], out, active, depth + 1)
    end
    active[value] = nil
  elseif is_tensor(value) then
    encode_tensor(value, out)
  else
    error("cannot serialise a " .. kind, 0)
  end
end

-- The bytes of `value`, in the format above.
function serialize.dump(value)
  local out = { serialize.magic }
  encode(value, out, {}, 0)
  return table.concat(out)
end

-- Reading ----------------------------------------------------------------

-- Floating-point values are read through their bits. LuaJIT keeps its
-- other types in the bits of NaNs, so a double or float NaN read as is may
-- come back as nil or as a pointer (a value file could forge any object).
-- Every NaN becomes the NaN Lua itself makes, keeping only its sign.
local nan_of_sign = { [0] = -(0 / 0), [1] = 0 / 0 }
if ffi.cast("uint32_t*", ffi.new("double[1]", nan_of_sign[1]))[1] < 2 ^ 31 then
  nan_of_sign[0], nan_of_sign[1] = nan_of_sign[1], nan_of_sign[0]
end
local sign_bit = 2 ^ 31

-- values[i], a double whose bits are words[2 * i] (low half) and
-- words[2 * i + 1] (high half).
local function number_at(values, words, i)
  local low, high = words[2 * i], words[2 * i + 1]
  local magnitude = high % sign_bit
  if magnitude > 0x7FF00000 or (magnitude == 0x7FF00000 and low ~= 0) then
    return nan_of_sign[high >= sign_bit and 1 or 0]
  end
  return values[i]
end

-- A reader over `bytes`; every error names `name` and the byte (1-based).
local function reader(bytes, name)
  local r = { bytes = bytes, pos = 1, name = name }

  function r.fail(what, at)
    error(string.format("accel.serialize: %s: %s at byte %d", name, what, at or r.pos), 0)
  end

  function r.remaining() return #bytes - r.pos + 1 end

  function r.take(n, what)
    if n > r.remaining() then
      r.fail(string.format("%s needs %d bytes but only %d remain", what, n, r.remaining()))
    end
    local start = r.pos
    r.pos = r.pos + n
    return start
  end

  function r.byte(what)
    return bytes:byte(r.take(1, what))
  end

  function r.count(what)
    local start, n, scale = r.pos, 0, 1
    for _ = 1, 8 do
      local b = r.byte(what)
      n = n + (b % 128) * scale
      if b < 128 then
        if n > max_count then r.fail(string.format("%s %.0f is too large", what, n), start) end
        return n
      end
      scale = scale * 128
    end
    r.fail(what .. " is longer than 8 bytes", start)
  end

  function r.string(what)
    local n = r.count(what .. "'s length")
    local start = r.take(n, what)
    return bytes:sub(start, start + n - 1)
  end

  -- Copies the next count * size bytes into a new array of `ctype`; for
  -- floating-point types also into an array of their 32-bit words, read
  -- for the bits. Two copies, not one memory read through two pointer
  -- types: LuaJIT's compiler, as C, takes differently typed pointers to
  -- hold different memory, and compiled loops read stale values otherwise.
  function r.array(ctype, count, size, what)
    local start = r.take(count * size, what)
    local source = ffi.cast("const char*", bytes) + (start - 1)
    local array = ffi.new(ctype .. "[?]", count * size / ffi.sizeof(ctype))
    ffi.copy(array, source, count * size)
    if ctype ~= "double" and ctype ~= "float" then return array end
    local words = ffi.new("uint32_t[?]", count * size / 4)
    ffi.copy(words, source, count * size)
    return array, words
  end

  return r
end

local function decode_tensor(r)
  local start = r.pos - 1
  local dtype = r.string("a tensor's dtype")
  local kind = element[dtype]
  if not kind then r.fail(string.format("unknown tensor dtype %q", dtype), start) end
  local ndim = r.count("a tensor's dimension count")
  if ndim > max_dims then r.fail(string.format("a tensor of %d dimensions (at most %d)", ndim, max_dims), start) end
  local sizes, numel, span = {}, 1, 1
  for i = 1, ndim do
    sizes[i] = r.count("a tensor's size")
    numel = numel * sizes[i]
    span = span * math.max(sizes[i], 1)
    if span > max_count then r.fail("a tensor of more than 2^53 elements", start) end
  end
  if numel * kind[2] > r.remaining() then
    r.fail(string.format("a %s tensor of %.0f elements needs %.0f bytes but only %d remain", dtype, numel, numel * kind[2],
                         r.remaining()), start)
  end
  local first = r.take(numel * kind[2], "a tensor's elements")
  local t = ck.value_tensor(first, kind[1], numel, r.bytes)
  -- Types stored wider than they are hold only values of their range.
  if kind[3] and numel > 0 and (t:min():item() < kind[3] or t:max():item() > kind[4]) then
    r.fail(string.format("a tensor of dtype %s holds a value outside %d to %d", dtype, kind[3], kind[4]), start)
  end
  if kind[1] ~= dtype then t = t:to(dtype) end
  return t:reshape(sizes)
end

local function decode(r, depth)
  local at = r.pos
  local tag = string.char(r.byte("a value"))
  if tag == "n" then return nil end
  if tag == "f" then return false end
  if tag == "t" then return true end
  if tag == "d" then
    local values, words = r.array("double", 1, 8, "a number")
    return number_at(values, words, 0)
  end
  if tag == "s" then return r.string("a string") end
  if tag == "T" then return decode_tensor(r) end
  if tag ~= "{" then r.fail(string.format("unknown value tag %q", tag), at) end
  if depth >= serialize.max_depth then r.fail("tables nested more than " .. serialize.max_depth .. " deep", at) end
  local n = r.count("a table's entry count")
  -- Every entry takes at least two bytes: a larger count is a lie.
  if 2 * n > r.remaining() then
    r.fail(string.format("a table of %.0f entries needs at least %.0f bytes but only %d remain", n, 2 * n,
                         r.remaining()), at)
  end
  local t = {}
  for _ = 1, n do
    local key_at = r.pos
    local k = decode(r, depth + 1)
    if not key_rank[type(k)] or k ~= k then r.fail("a table key that is " .. tostring(k), key_at) end
    if t[k] ~= nil then r.fail("the table key " .. tostring(k) .. " twice", key_at) end
    local v = decode(r, depth + 1)
    t[k] = v
  end
  return t
end

-- The value in `bytes` (from serialize.dump); `name` (a file, a rank) is
-- named in every error.
function serialize.load(bytes, name)
  name = name or "a serialised value"
  if type(bytes) ~= "string" then
    error(string.format("accel.serialize: %s: expected a string of bytes, got a %s", name, type(bytes)), 0)
  end
  if bytes:sub(1, #serialize.magic) == serialize.magic then
    local r = reader(bytes, name)
    r.pos = #serialize.magic + 1
    local value = decode(r, 0)
    if r.pos <= #bytes then r.fail(string.format("%d unexpected byte(s) after the value", r.remaining())) end
    return value
  end
  error(string.format("accel.serialize: %s: not an accel value file (it lacks the %q header)", name,
                      serialize.magic:sub(1, -2)), 0)
end

return serialize
