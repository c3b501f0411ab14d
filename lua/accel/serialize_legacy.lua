-- Reads the text that accel.serialize wrote before its binary format, so
-- that older checkpoints still load, without ever running it as Lua: a
-- parser for exactly that text and nothing else. It was
--   "return " value
-- where a value is nil, true, false, a number as "%.17g" writes it, 0/0,
-- 1/0 or -1/0, a string as "%q" writes it, a table {[key]=value,...} (a
-- comma after every entry), or tensor(data,"dtype") with data the nested
-- tables (or the single number) that Tensor:totable gives. No spaces.
-- Anything else is refused, naming the byte; tables nest at most max_depth.
local core = require("accel.core")

local legacy = {}

legacy.prefix = "return "

function legacy.is_legacy(text)
  return text:sub(1, #legacy.prefix) == legacy.prefix
end

local escapes = {
  a = "\a", b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", v = "\v",
  ["\\"] = "\\", ['"'] = '"', ["'"] = "'", ["\n"] = "\n",
}

local words = { { "nil", nil }, { "true", true }, { "false", false } }

local specials = { ["0/0"] = 0 / 0, ["1/0"] = 1 / 0, ["-1/0"] = -1 / 0 }

local function parser(text, name, max_depth, dtypes)
  local p = { pos = 1 }

  local function fail(what, at)
    error(string.format("accel.serialize: %s (legacy text): %s at byte %d", name, what, at or p.pos), 0)
  end

  local function found()
    local c = text:sub(p.pos, p.pos)
    return c == "" and "the end" or string.format("%q", c)
  end

  local function expect(literal)
    if text:sub(p.pos, p.pos + #literal - 1) ~= literal then
      fail(string.format("expected %q, found %s", literal, found()))
    end
    p.pos = p.pos + #literal
  end

  local function number()
    local start = p.pos
    local digits = text:match("^%-?%d+%.?%d*[eE][-+]?%d+", start) or text:match("^%-?%d+%.?%d*", start)
    if not digits then fail("expected a number, found " .. found()) end
    p.pos = start + #digits
    if text:sub(p.pos, p.pos) == "/" then
      local special = digits .. text:sub(p.pos, p.pos + 1)
      if specials[special] == nil then fail("a division other than 0/0, 1/0 or -1/0", start) end
      p.pos = p.pos + 2
      return specials[special]
    end
    return tonumber(digits)
  end

  local function quoted()
    local start = p.pos
    p.pos = p.pos + 1
    local parts = {}
    while true do
      local stop = text:find('["\\\n\r]', p.pos)
      if not stop then fail("a string that does not end", start) end
      parts[#parts + 1] = text:sub(p.pos, stop - 1)
      local c = text:sub(stop, stop)
      p.pos = stop + 1
      if c == '"' then return table.concat(parts) end
      if c ~= "\\" then fail("a line break inside a string", stop) end
      local e = text:sub(p.pos, p.pos)
      local code = text:match("^%d%d?%d?", p.pos)
      if code then
        if tonumber(code) > 255 then fail("the escape \\" .. code .. " is beyond 255", stop) end
        parts[#parts + 1] = string.char(tonumber(code))
        p.pos = p.pos + #code
      elseif escapes[e] then
        parts[#parts + 1] = escapes[e]
        p.pos = p.pos + 1
      else
        fail("an unknown escape in a string", stop)
      end
    end
  end

  local value

  local function tensor(depth)
    local start = p.pos
    expect("tensor(")
    local data = value(depth)
    local kind = type(data)
    if kind ~= "table" and kind ~= "number" and kind ~= "boolean" then
      fail("a tensor's data must be numbers, booleans or tables of them", start)
    end
    expect(",")
    if text:sub(p.pos, p.pos) ~= '"' then fail("expected a dtype string, found " .. found()) end
    local dtype = quoted()
    if not dtypes[dtype] then fail(string.format("unknown tensor dtype %q", dtype), start) end
    expect(")")
    local ok, t = pcall(core.tensor, data, { dtype = dtype })
    if not ok then fail("not a tensor: " .. tostring(t), start) end
    return t
  end

  local function table_(depth)
    if depth >= max_depth then fail("tables nested more than " .. max_depth .. " deep") end
    expect("{")
    local t = {}
    while text:sub(p.pos, p.pos) ~= "}" do
      expect("[")
      local key_at = p.pos
      local k = value(depth + 1)
      local kind = type(k)
      if (kind ~= "number" and kind ~= "string" and kind ~= "boolean") or k ~= k then
        fail("a table key that is " .. tostring(k), key_at)
      end
      if t[k] ~= nil then fail("the table key " .. tostring(k) .. " twice", key_at) end
      expect("]=")
      t[k] = value(depth + 1)
      expect(",")
    end
    p.pos = p.pos + 1
    return t
  end

  function value(depth)
    local c = text:sub(p.pos, p.pos)
    if c == "{" then return table_(depth) end
    if c == '"' then return quoted() end
    if c == "-" or c:match("%d") then return number() end
    for _, word in ipairs(words) do
      if text:sub(p.pos, p.pos + #word[1] - 1) == word[1] then
        p.pos = p.pos + #word[1]
        return word[2]
      end
    end
    if text:sub(p.pos, p.pos + 6) == "tensor(" then return tensor(depth) end
    fail("expected a value, found " .. found())
  end

  function p.document()
    expect(legacy.prefix)
    local v = value(0)
    if p.pos <= #text then fail("unexpected " .. found() .. " after the value") end
    return v
  end

  return p
end

-- The value in `text`; `dtypes` lists the tensor dtypes allowed (as keys).
function legacy.load(text, name, max_depth, dtypes)
  return parser(text, name, max_depth, dtypes).document()
end

return legacy
