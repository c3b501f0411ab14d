-- The fields of a state read back from a file (a checkpoint's value files,
-- a loader's state_dict), checked before anything takes them: a field of
-- the wrong type or range is an error naming where it came from and the
-- field, not a failure at the next step far from the file.
--   state_fields.check(t, { {"epoch", "count"}, {"shuffle", "boolean"} }, "'ck/dataloader_0.lua'")
local core = require("accel.core")

local state_fields = {}

local function whole(v) return type(v) == "number" and v % 1 == 0 and v > -math.huge and v < math.huge end

-- A finite number of at least 0; a one-element tensor holding one counts
-- (backward's num_items may be a tensor, and the count it adds up to is saved).
local function amount(v)
  if core.is_tensor(v) then
    if v:numel() ~= 1 or v.dtype == "bool" then return false end
    v = v:item()
  end
  return type(v) == "number" and v >= 0 and v < math.huge
end

-- Why table `t` is not a list (keys 1 to n and nothing else, which is what
-- ipairs walks): "has the key x", "has gaps"; nil when it is one.
function state_fields.list_problem(t)
  local n = 0
  for k in pairs(t) do
    n = n + 1
    if type(k) ~= "number" or k % 1 ~= 0 or k < 1 then return "has the key " .. tostring(k) end
  end
  if n ~= #t then return "has gaps" end
  return nil
end

-- kind -> what it must be, as messages say it, and the test.
local kinds = {
  count = { "a whole number of at least 0", function(v) return whole(v) and v >= 0 end },
  ["positive count"] = { "a whole number of at least 1", function(v) return whole(v) and v >= 1 end },
  integer = { "a whole number", whole },
  size = { "a whole number of at least -1", function(v) return whole(v) and v >= -1 end },
  amount = { "a finite number of at least 0 (or a one-element tensor of one)", amount },
  ["positive amount"] = { "a finite number above 0", function(v) return type(v) == "number" and v > 0 and v < math.huge end },
  boolean = { "true or false", function(v) return type(v) == "boolean" end },
  ["optional boolean"] = { "true, false or absent", function(v) return v == nil or type(v) == "boolean" end },
  ["list of counts"] = { "a list of whole numbers of at least 0", function(v)
    if type(v) ~= "table" or state_fields.list_problem(v) then return false end
    for _, x in ipairs(v) do
      if not (whole(x) and x >= 0) then return false end
    end
    return true
  end },
  table = { "a table", function(v) return type(v) == "table" end },
}

-- How a bad value is shown: strings quoted, tables as such, NaN by name.
local function shown(v)
  if type(v) == "string" then return string.format("%q", #v > 40 and v:sub(1, 40) .. "..." or v) end
  if type(v) == "table" then return "a table" end
  if v ~= v then return "NaN" end
  return tostring(v)
end

-- Raises "<where>: '<field>' must be <what>, got <value>" for the first
-- field of `spec` ({name, kind} pairs, in order) that `t` gets wrong.
function state_fields.check(t, spec, where)
  if type(t) ~= "table" then error(string.format("%s: the state must be a table, got %s", where, shown(t)), 0) end
  for _, field in ipairs(spec) do
    local name, kind = field[1], kinds[field[2]]
    if not kind[2](t[name]) then
      error(string.format("%s: '%s' must be %s, got %s", where, name, kind[1], shown(t[name])), 0)
    end
  end
  return t
end

return state_fields
