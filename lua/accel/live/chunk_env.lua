-- Where a control chunk runs (docs/live-runs.md): in a layer over the
-- recipe's global variables. It reads them (and `acc`) as the recipe does;
-- what it assigns to global names stays in the layer until commit() copies
-- it into the globals, which the controller does only once every rank ran
-- the chunk without error. So a chunk that raises on one rank changes no
-- global on any rank. Functions the chunk makes keep the layer as their
-- environment, which after the commit reads and writes the globals.
local chunk_env = {}

-- Declares and sets a global as a recipe's top level does (strict globals,
-- bindings/worker_state.cpp): from a main chunk.
local declare = assert(loadstring("local name, value = ...; _G[name] = value", "=(control)"))

local function describe(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  return table.concat(parts, "\t")
end

-- The error with the traceback of the chunk's own frames (those below it,
-- the controller's, say nothing to its author).
function chunk_env.traceback(e)
  local text = debug.traceback(tostring(e), 2)
  return (text:gsub("\n%s*%[C%]: in function 'xpcall'.*$", ""))
end

-- Compiles `text` (a leading "=" returns the value of the expression after
-- it, as the REPL's does) named `name` for messages, and runs it with `acc`
-- in scope. Returns ok, then the values as text (or the error with its
-- traceback), then the commit function.
function chunk_env.run(text, name, acc)
  local source = text:match("^%s*=(.*)$")
  -- Source text only ("t"): a chunk comes from outside the rank, and
  -- LuaJIT runs bytecode unverified (the REPL's chunks are read the same way).
  local fn, err = load(source and ("return " .. source) or text, "=" .. name, "t")
  if not fn then return false, err, nil end
  local G = _G
  local layer = setmetatable({}, { __index = function(_, key)
    if key == "acc" and rawget(G, "acc") == nil then return acc end
    return G[key]
  end })
  setfenv(fn, layer)
  local results = { xpcall(fn, chunk_env.traceback) }
  if not results[1] then return false, results[2], nil end
  local function commit()
    local names = {}
    for key, value in pairs(layer) do names[#names + 1] = { key, value } end
    for _, entry in ipairs(names) do
      rawset(layer, entry[1], nil)
      declare(entry[1], entry[2])
    end
    setmetatable(layer, { __index = getmetatable(layer).__index, __newindex = G })
  end
  return true, describe(unpack(results, 2, table.maxn(results))), commit
end

return chunk_env
