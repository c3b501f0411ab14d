-- nproc: 1
-- accel.serialize: every kind of value comes back exactly, text written by
-- the older format still loads, and hostile bytes are refused with a clear
-- error without running anything, hanging or allocating more than they hold.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local hostile = dofile(here .. "helpers/hostile_values.lua")
local serialize = require("accel.serialize")
local ffi = require("ffi")

local function bits(x)
  local box = ffi.new("double[1]", x)
  return ffi.string(box, 8)
end

-- Deep equality; numbers bit for bit, tensors by dtype, shape and values.
local function same(a, b, where)
  where = where or "value"
  check.equal(type(a), type(b), where .. ": type")
  if type(a) == "number" then
    if a ~= a then
      check.truthy(b ~= b, where .. ": NaN")
    else
      check.equal(bits(a), bits(b), where .. ": bits of " .. tostring(a))
    end
  elseif type(a) == "table" then
    for k, v in pairs(a) do same(v, b[k], where .. "." .. tostring(k)) end
    for k in pairs(b) do check.truthy(a[k] ~= nil, where .. ": no extra key " .. tostring(k)) end
  elseif type(a) == "userdata" then
    check.equal(b.dtype, a.dtype, where .. ": dtype")
    check.equal(table.concat(b:size(), "x"), table.concat(a:size(), "x"), where .. ": shape")
    check.truthy(b:eq(a):all():item(), where .. ": tensor values")
  else
    check.equal(b, a, where)
  end
end

local all_bytes = {}
for i = 0, 255 do all_bytes[#all_bytes + 1] = string.char(i) end
all_bytes = table.concat(all_bytes)

local int64 = { dtype = accel.int64 }
-- Beyond 2^53 a double cannot hold them: built in int64 arithmetic.
local big = accel.tensor({ 2 ^ 62, -2 ^ 62, 0, -1 }, int64) * 2 + accel.tensor({ 1, -1, 7, 0 }, int64)
-- 2^63 - 1 and -2^63: (2^62 - 1) + 2^62, and -2^62 - 2^62.
local quarter = accel.tensor({ 2 ^ 62, -2 ^ 62 }, int64)
local extreme = (quarter - accel.tensor({ 1, 0 }, int64)) + quarter

local values = {
  { "nil", nil },
  { "true", true },
  { "false", false },
  { "zero", 0 },
  { "negative zero", -0.0 },
  { "2^53", 2 ^ 53 },
  { "-2^53 - 2", -2 ^ 53 - 2 },
  { "a tenth", 0.1 },
  { "a denormal", 4.9406564584124654e-324 },
  { "the largest double", 1.7976931348623157e308 },
  { "inf", math.huge },
  { "-inf", -math.huge },
  { "NaN", 0 / 0 },
  { "the empty string", "" },
  { "every byte", all_bytes },
  { "a string like the magic", serialize.magic .. "return " },
  { "an empty table", {} },
  { "a nested table", { 1, 2, { 3, { 4, "five" } }, name = "x", [true] = false, [false] = 1, [-2.5] = "neg",
                        [0] = { {} }, ["\0key"] = -0.0 } },
  { "a float32 matrix", accel.tensor({ { 1.5, -2.25, 3.1 }, { 1e-30, 7, -0.0 } }, { dtype = accel.float32 }) },
  { "a float64 vector", accel.tensor({ 0.1, 1 / 3, 1e300 }, { dtype = accel.float64 }) },
  { "a float16 vector", accel.tensor({ 0.1, 65504, -6e-8 }, { dtype = accel.float16 }) },
  { "a bfloat16 vector", accel.tensor({ 0.1, 3e38, -1.5 }, { dtype = accel.bfloat16 }) },
  { "a bool matrix", accel.tensor({ { true, false }, { false, true } }, { dtype = accel.bool }) },
  { "int64 beyond 2^53", big },
  { "int64 extremes", extreme },
  { "int32", accel.tensor({ 2 ^ 31 - 1, -2 ^ 31 }, { dtype = accel.int32 }) },
  { "int16", accel.tensor({ 32767, -32768 }, { dtype = accel.int16 }) },
  { "int8", accel.tensor({ 127, -128 }, { dtype = accel.int8 }) },
  { "uint8", accel.tensor({ 0, 255 }, { dtype = accel.uint8 }) },
  { "an empty 0x3 tensor", accel.zeros(0, 3) },
  { "an empty int64 tensor", accel.zeros(2, 0):long() },
  { "an empty bool tensor", accel.zeros(0):bool() },
  { "a 0-dimensional tensor", accel.tensor({ 2.5 }, { dtype = accel.float64 }):reshape({}) },
  { "a non-contiguous tensor", accel.tensor({ { 1, 2 }, { 3, 4 } }, int64):t() },
  { "a table of tensors", { weight = accel.randn(3, 2), step = 4, ids = accel.tensor({ 1, 2 }, int64) } },
}

check.truthy(big:max():item() > 2 ^ 62, "the int64 test values exceed 2^53")
for _, case in ipairs(values) do
  local what, value = case[1], case[2]
  local bytes = serialize.dump(value)
  check.equal(bytes:sub(1, #serialize.magic), serialize.magic, what .. ": written with the magic")
  same(value, serialize.load(bytes, what), what)
end

-- Same table, same bytes: keys are written in sorted order.
local a, b = {}, {}
for i = 1, 50 do a["k" .. i] = i end
for i = 50, 1, -1 do b["k" .. i] = i end
check.equal(serialize.dump(a), serialize.dump(b), "the bytes do not depend on insertion order")

-- What cannot be written is refused when writing.
check.raises(function() serialize.dump(print) end, "a function", "cannot serialise a function")
local cycle = {}
cycle.self = cycle
check.raises(function() serialize.dump(cycle) end, "a cycle", "contains itself")
check.raises(function() serialize.dump({ [{}] = 1 }) end, "a table key", "with a table key")
local deep = {}
for _ = 1, 150 do deep = { deep } end
check.raises(function() serialize.dump(deep) end, "150 deep", "nested more than 100 deep")

-- Hostile bytes: refused, naming the source and what is wrong; nothing runs.
local marker = os.tmpname()
os.remove(marker)
local function peak_kb()
  local f = assert(io.open("/proc/self/status"))
  local status = f:read("*a")
  f:close()
  return tonumber(status:match("VmHWM:%s*(%d+)"))
end
local before = peak_kb()
for _, case in ipairs(hostile(marker)) do
  local what, bytes, words = case[1], case[2], case[3]
  check.raises(function() serialize.load(bytes, "file.lua") end, what, "accel.serialize: file.lua", unpack(words))
end
check.truthy(io.open(marker) == nil, "no payload wrote its marker file")
check.truthy(peak_kb() - before < 64 * 1024, "hostile inputs allocated less than 64 MB")
check.raises(function() serialize.load(nil, "x") end, "not a string", "expected a string")

-- Long tensors and many numbers: their reading loops run compiled by
-- LuaJIT's JIT, which once read stale values through a punned pointer.
for _, dtype in ipairs({ "float32", "bfloat16", "float16", "float64" }) do
  local t = accel.randn(2000):to(dtype)
  same(t, serialize.load(serialize.dump(t), "2000 " .. dtype), "2000 " .. dtype .. " elements")
end
local many = {}
for i = 1, 2000 do many[i] = i + 0.5 end
same(many, serialize.load(serialize.dump(many), "2000 numbers"), "2000 numbers")

-- NaNs of any bits read back as numbers. LuaJIT keeps nil, pointers and
-- other types in NaN bits: read as they are, these came back as nil.
local value_bytes = function(body) return serialize.magic .. body end
local nan_words = { "\255\255\255\255\255\255\255\255", "\0\0\0\0\0\0\250\255", "\1\0\0\0\0\0\240\127" }
for _, word in ipairs(nan_words) do
  local x = serialize.load(value_bytes("d" .. word), "a NaN with a payload")
  check.truthy(type(x) == "number" and x ~= x, "a double NaN of bytes " .. word:byte(8) .. " is a NaN number")
end
local floats = serialize.load(value_bytes("T\7float32\1\3" .. "\251\255\255\255" .. "\1\0\192\127" .. "\0\0\128\63"),
                              "a float32 tensor of NaNs")
local list = floats:totable()
check.truthy(list[1] ~= list[1] and list[2] ~= list[2] and list[3] == 1, "float NaN payloads are NaN elements")

-- Types stored wider than they are: a value outside the type's range is
-- refused, not wrapped; so is a bool element other than 0 and 1.
local function one_element(dtype, stored_bytes)
  return value_bytes("T" .. serialize.varint(#dtype) .. dtype .. "\1\1" .. stored_bytes)
end
check.equal(serialize.load(one_element("int8", "\127\0\0\0"), "int8 127"):item(), 127, "an int8 at its bound reads")
check.raises(function() serialize.load(one_element("int8", "\44\1\0\0"), "file.lua") end, "an int8 of 300",
             "accel.serialize: file.lua: a tensor of dtype int8 holds a value outside -128 to 127")
check.raises(function() serialize.load(one_element("bool", "\2"), "file.lua") end, "a bool of 2",
             "a tensor of dtype bool holds a value outside 0 to 1")

-- Large tensors are written and read whole by the engine, not element by
-- element through Lua tables (the time is printed, not asserted).
local big_values = { f = accel.randn(1000000), i = accel.randint(-2 ^ 40, 2 ^ 40, { 1000000 }) }
local clock = os.clock()
local back = serialize.load(serialize.dump(big_values), "a million elements")
check.truthy(back.f:equal(big_values.f) and back.i:equal(big_values.i), "a million elements read back equal")
print(string.format("a million float32 and int64 elements: dumped and loaded in %.2f s", os.clock() - clock))
-- Many tensors in one value (each read in place from the file's bytes).
local list = {}
for i = 1, 2000 do list[i] = accel.full({ 3 }, i) end
local list_back = serialize.load(serialize.dump(list), "2000 tensors")
check.truthy(#list_back == 2000 and list_back[2000]:equal(list[2000]) and list_back[1]:equal(list[1]),
             "2000 tensors in one value read back equal")

check.done("serialize")
