-- The part of Python's regular expressions that PEFT's target_modules
-- strings use, matched as re.fullmatch matches them: a string
-- target_modules is a regex on the module's full name
-- (".*\.(q_proj|v_proj)", "model\.layers\.\d+\.mlp\..*"), and the same
-- string goes into adapter_config.json for PEFT to read, so it must mean
-- the same here. Lua patterns cannot say alternation, hence this matcher.
--   local matches = regex.compile(pattern, where)   -- matches(name) -> boolean
-- Supported: literals, ".", escapes (\d \D \w \W \s \S and escaped
-- punctuation), classes ([a-z_], [^.]), groups ((...), (?:...),
-- (?P<name>...)), "|", the quantifiers * + ? {n} {n,} {,m} {n,m} and their
-- lazy forms (which fullmatch cannot tell from the greedy ones), "^" first
-- and "$" last. Everything else (lookarounds, backreferences, flags, \b,
-- possessive quantifiers, anchors inside) is refused with an error naming
-- the construct, rather than matched differently from Python.
local args = require("accel.util.args")

local regex = {}

local function class_of(letter)
  if letter == "d" then return function(c) return c:match("%d") ~= nil end end
  if letter == "w" then return function(c) return c:match("[%w_]") ~= nil end end
  if letter == "s" then return function(c) return c:match("%s") ~= nil end end
end

-- A parser over one pattern; errors name the pattern and the construct.
local function parser(pattern, where)
  local pos = 1
  local p = {}

  local function refuse(what)
    args.error(string.format("%s: the pattern '%s' uses %s at character %d, which accel.peft's matcher does not "
                             .. "support (it takes literals, ., classes, groups, |, quantifiers and ^ $ at the "
                             .. "ends, as Python's re.fullmatch reads them)", where, pattern, what, pos))
  end

  -- What Python's re refuses too.
  local function invalid(what)
    args.error(string.format("%s: the pattern '%s' is not a valid regular expression: %s at character %d", where,
                             pattern, what, pos))
  end

  local function peek(n) return pattern:sub(pos, pos + (n or 1) - 1) end

  -- An escape after the backslash at pos: a test on one character.
  local function escape()
    local c = pattern:sub(pos + 1, pos + 1)
    if c == "" then invalid("a trailing backslash") end
    pos = pos + 2
    local lower = class_of(c:lower())
    if lower then
      if c == c:lower() then return lower end
      return function(x) return not lower(x) end
    end
    if c == "n" then return function(x) return x == "\n" end end
    if c == "t" then return function(x) return x == "\t" end end
    if c:match("%w") then
      pos = pos - 2
      refuse("the escape \\" .. c)
    end
    return function(x) return x == c end
  end

  local function class()
    pos = pos + 1  -- [
    local negate = peek() == "^"
    if negate then pos = pos + 1 end
    local tests, first = {}, true
    while true do
      local c = peek()
      if c == "" then invalid("an unclosed [") end
      if c == "]" and not first then break end
      first = false
      local test
      if c == "\\" then
        test = escape()
      else
        pos = pos + 1
        if peek() == "-" and pattern:sub(pos + 1, pos + 1) ~= "]" and pattern:sub(pos + 1, pos + 1) ~= "" then
          local last = pattern:sub(pos + 1, pos + 1)
          if last == "\\" then refuse("a range ending in an escape") end
          pos = pos + 2
          local lo = c
          test = function(x) return x >= lo and x <= last end
        else
          test = function(x) return x == c end
        end
      end
      tests[#tests + 1] = test
    end
    pos = pos + 1  -- ]
    return function(x)
      for _, t in ipairs(tests) do
        if t(x) then return not negate end
      end
      return negate
    end
  end

  -- {n}, {n,}, {,m}, {n,m} at pos, or nil when the brace is a literal (as Python reads "a{" or "a{x}").
  local function braces()
    local text = pattern:match("^{(%d*,?%d*)}", pos)
    if not text or text == "" then return nil end
    local lo, comma, hi = text:match("^(%d*)(,?)(%d*)$")
    local min = tonumber(lo) or 0
    local max = comma == "" and min or tonumber(hi) or math.huge
    if max < min then invalid("a quantifier {" .. text .. "} whose minimum exceeds its maximum") end
    pos = pos + #text + 2
    return min, max
  end

  function p.alternation(depth)
    local options = { p.sequence(depth) }
    while peek() == "|" do
      pos = pos + 1
      options[#options + 1] = p.sequence(depth)
    end
    return #options == 1 and options[1] or { kind = "alt", options = options }
  end

  function p.atom(depth)
    local c = peek()
    if c == "(" then
      if pattern:sub(pos, pos + 2) == "(?:" then
        pos = pos + 3
      elseif pattern:sub(pos, pos + 3) == "(?P<" then
        local name = pattern:match("^%(%?P<([%a_][%w_]*)>", pos)
        if not name then invalid("a malformed named group") end
        pos = pos + #name + 5
      elseif pattern:sub(pos, pos + 1) == "(?" then
        refuse("the group '" .. pattern:sub(pos, pos + 2) .. "'")
      else
        pos = pos + 1
      end
      local inner = p.alternation(depth + 1)
      if peek() ~= ")" then invalid("an unclosed (") end
      pos = pos + 1
      return inner
    end
    if c == "[" then return { kind = "char", test = class() } end
    if c == "\\" then return { kind = "char", test = escape() } end
    if c == "." then
      pos = pos + 1
      return { kind = "char", test = function(x) return x ~= "\n" end }
    end
    if c == "^" or c == "$" then refuse("an anchor '" .. c .. "' inside the pattern") end
    if c == "*" or c == "+" or c == "?" or (c == "{" and pattern:match("^{%d*,?%d*}", pos) and peek(2) ~= "{}") then
      invalid("a quantifier '" .. c .. "' with nothing before it")
    end
    pos = pos + 1
    return { kind = "char", test = function(x) return x == c end }
  end

  function p.sequence(depth)
    local items = {}
    while true do
      local c = peek()
      if c == "" or c == "|" or (c == ")" and depth > 0) then break end
      if c == ")" then invalid("an unmatched )") end
      if c == "$" and pos == #pattern and depth == 0 then
        pos = pos + 1  -- fullmatch ends there anyway
        break
      end
      local node = p.atom(depth)
      local min, max
      local q = peek()
      if q == "*" then min, max, pos = 0, math.huge, pos + 1
      elseif q == "+" then min, max, pos = 1, math.huge, pos + 1
      elseif q == "?" then min, max, pos = 0, 1, pos + 1
      elseif q == "{" then min, max = braces()
      end
      if min then
        if peek() == "?" then
          pos = pos + 1  -- lazy: the same strings fully match
        elseif peek() == "+" then
          refuse("a possessive quantifier")
        end
        if peek() == "*" or peek() == "+" or (peek() == "{" and pattern:match("^{%d*,?%d*}", pos)
                                                and pattern:sub(pos, pos + 1) ~= "{}") then
          invalid("a repeated quantifier")
        end
        node = { kind = "repeat", node = node, min = min, max = max }
      end
      items[#items + 1] = node
    end
    return { kind = "seq", items = items }
  end

  function p.parse()
    if peek() == "^" then pos = pos + 1 end  -- fullmatch starts there anyway
    local tree = p.alternation(0)
    if pos <= #pattern then invalid("an unmatched )") end
    return tree
  end

  return p
end

-- node -> function(s, i, k): whether the node matches s from i and the
-- continuation k accepts where it ends (backtracking through k).
local function compile(node)
  if node.kind == "char" then
    local test = node.test
    return function(s, i, k)
      return i <= #s and test(s:sub(i, i)) and k(i + 1)
    end
  end
  if node.kind == "seq" then
    local parts = {}
    for j, item in ipairs(node.items) do parts[j] = compile(item) end
    local function from(j, s, i, k)
      if j > #parts then return k(i) end
      return parts[j](s, i, function(n) return from(j + 1, s, n, k) end)
    end
    return function(s, i, k) return from(1, s, i, k) end
  end
  if node.kind == "alt" then
    local options = {}
    for j, option in ipairs(node.options) do options[j] = compile(option) end
    return function(s, i, k)
      for _, option in ipairs(options) do
        if option(s, i, k) then return true end
      end
      return false
    end
  end
  local inner, min, max = compile(node.node), node.min, node.max
  local function again(s, i, k, count)
    -- Greedy; an iteration that consumed nothing ends the repetition, so
    -- patterns like (a*)* terminate.
    if count < max and inner(s, i, function(n)
      return (n > i or count < min) and again(s, n, k, count + 1)
    end) then
      return true
    end
    return count >= min and k(i)
  end
  return function(s, i, k) return again(s, i, k, 0) end
end

function regex.compile(pattern, where)
  local matcher = compile(parser(pattern, where).parse())
  return function(s)
    return matcher(s, 1, function(i) return i == #s + 1 end) == true
  end
end

return regex
