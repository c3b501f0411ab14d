-- Argument checks for the Lua side of the API (the Accelerator and its
-- parts, modules, nn.init, schedules).
-- Errors point at the recipe line that made the call, not at library
-- internals, and name the function, the argument and the offending value.
local args = {}

local library = debug.getinfo(1, "S").source:match("^(@.*/accel/)")

-- Raises `message` at the innermost caller outside the accel Lua library.
function args.error(message)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info then
      level = 2
      break
    end
    if info.what ~= "C" and info.source:sub(1, #library) ~= library then break end
    level = level + 1
  end
  error(message, level)
end

-- A stand-in for options whose default is "absent" (tables cannot hold nil).
args.NONE = setmetatable({}, { __tostring = function() return "none" end })

-- Fills defaults into an options table and refuses unknown keys, listing the
-- known ones. Options defaulting to args.NONE come back as nil when not given.
-- `types` (optional) maps keys to the Lua types their given values may have,
-- "number" or several as "number|table"; a value of another type is an
-- error naming the key.
function args.options(where, given, defaults, types)
  if given == nil then given = {} end
  if type(given) ~= "table" then
    args.error(string.format("%s: options must be a table, got a %s", where, type(given)))
  end
  for key in pairs(given) do
    if defaults[key] == nil then
      local known = {}
      for k in pairs(defaults) do known[#known + 1] = tostring(k) end
      table.sort(known)
      args.error(string.format("%s: unknown option '%s' (%s)", where, tostring(key),
                               #known == 0 and "it takes no options" or ("known: " .. table.concat(known, ", "))))
    end
  end
  for key, allowed in pairs(types or {}) do
    local value = given[key]
    if value ~= nil and not ("|" .. allowed .. "|"):find("|" .. type(value) .. "|", 1, true) then
      args.error(string.format("%s: option '%s' must be a %s, got %s (a %s)", where, key,
                               allowed:gsub("|", " or "), tostring(value), type(value)))
    end
  end
  local out = {}
  for key, default in pairs(defaults) do
    local value = given[key]
    if value == nil then value = default end
    if value ~= args.NONE then out[key] = value end
  end
  return out
end

-- The bias flag of a layer that takes it in an options table {bias = true}
-- or alone, as PyTorch's positional argument (nn.Linear(3, 2, false)).
function args.bias_option(where, value)
  if value == nil or type(value) == "boolean" then return value ~= false end
  if type(value) ~= "table" then
    args.error(string.format("%s: expected an options table {bias = ...} or a boolean bias, got a %s", where,
                             type(value)))
  end
  return args.options(where, value, { bias = true }, { bias = "boolean" }).bias
end

function args.positive_integer(where, name, value)
  if type(value) ~= "number" or value < 1 or value % 1 ~= 0 then
    args.error(string.format("%s: %s must be a positive integer, got %s", where, name, tostring(value)))
  end
  return value
end

-- A recipe's `key=value` arguments (`list`, its arg table) over
-- `defaults` (every key with its default): a value is a positive integer
-- unless `kinds` says "string" or "number" for its key. An unknown key is
-- refused naming the known ones.
function args.key_values(where, list, defaults, kinds)
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for i = 1, #list do
    local key, value = list[i]:match("^([%w_]+)=(.*)$")
    if not key or defaults[key] == nil then
      local known = {}
      for k in pairs(defaults) do known[#known + 1] = k end
      table.sort(known)
      args.error(string.format("%s: expected key=value with a key among %s, got '%s'", where,
                               table.concat(known, ", "), list[i]))
    end
    local kind = (kinds or {})[key]
    if kind == "string" then
      out[key] = value
    elseif kind == "number" then
      out[key] = tonumber(value) or args.error(string.format("%s: %s must be a number, got '%s'", where, key, value))
    else
      out[key] = args.positive_integer(where, key, tonumber(value) or value)
    end
  end
  return out
end

function args.probability(where, name, value)
  if type(value) ~= "number" or value < 0 or value > 1 then
    args.error(string.format("%s: %s must be between 0 and 1, got %s", where, name, tostring(value)))
  end
  return value
end

-- A size per spatial dim from a number (repeated) or a table of `n` numbers.
function args.tuple(where, name, value, n)
  if type(value) == "number" then
    local out = {}
    for i = 1, n do out[i] = value end
    value = out
  end
  if type(value) ~= "table" or #value ~= n then
    args.error(string.format("%s: %s must be a number or a table of %d numbers, got %s", where, name, n,
                             tostring(value)))
  end
  for i = 1, n do
    if type(value[i]) ~= "number" or value[i] % 1 ~= 0 then
      args.error(string.format("%s: %s[%d] must be an integer, got %s", where, name, i, tostring(value[i])))
    end
  end
  return value
end

-- "[2, 3, 4]": a tensor's shape (or a list of sizes) as every message
-- writes it (engine/tensor_description.h).
function args.shape(t)
  return "[" .. table.concat(type(t) == "table" and t or t.shape, ", ") .. "]"
end

-- Refuses an input whose number of dims is not one of `dims`.
function args.input_dims(where, x, dims, layout)
  if type(x) ~= "userdata" then
    args.error(string.format("%s: expected a tensor input, got a %s", where, type(x)))
  end
  local d = x:dim()
  for _, allowed in ipairs(dims) do
    if d == allowed then return end
  end
  args.error(string.format("%s: expected a %s input %s, got shape %s", where,
                           table.concat(dims, "-D or ") .. "-D", layout, args.shape(x)))
end

return args
