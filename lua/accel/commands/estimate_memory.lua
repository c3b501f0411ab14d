-- `accel-run estimate-memory MODEL.lua [--dtypes float32 float16 ...]
-- [--num-processes N] [--no-split CLASS ...]`, run as a one-process recipe:
-- MODEL.lua returns a function that builds the model, which runs under
-- accel.init_empty_weights, so nothing is allocated. Prints, per dtype, the
-- largest layer and the total size (what loading needs), and what training
-- with AdamW needs for the model states per process on N processes for each
-- zero stage, as `accelerate estimate-memory` does for loading. Training
-- keeps, per parameter in the dtype given: the weight, its gradient and
-- AdamW's two moments (4 values); stage 1 shards the moments, stage 2 the
-- gradients too, stage 3 the weights as well, plus one whole largest layer
-- gathered for its forward. Activations depend on the batch and are not counted.
local accel = require("accel")
local module_sizes = require("accel.big_modeling.module_sizes")
local model_parts = require("accel.big_modeling.model_parts")
local memory_size = require("accel.big_modeling.memory_size")
local dtypes = require("accel.big_modeling.dtypes")

local usage = "usage: accel-run estimate-memory MODEL.lua [--dtypes float32 float16 bfloat16] "
              .. "[--num-processes N] [--no-split CLASS ...]"

local function fail(message)
  io.stderr:write("accel-run estimate-memory: error: " .. message .. "\n" .. usage .. "\n")
  os.exit(2)
end

local function parse(argv)
  local o = { dtypes = {}, num_processes = 1, no_split = {} }
  local list
  for _, a in ipairs(argv) do
    if a == "--dtypes" then
      list = o.dtypes
    elseif a == "--no-split" then
      list = o.no_split
    elseif a == "--num-processes" then
      list = "num_processes"
    elseif a:sub(1, 2) == "--" then
      fail("unknown option " .. a)
    elseif list == "num_processes" then
      o.num_processes = tonumber(a)
      if not o.num_processes or o.num_processes < 1 or o.num_processes ~= math.floor(o.num_processes) then
        fail("--num-processes must be a whole number of at least 1, got " .. a)
      end
      list = nil
    elseif list then
      list[#list + 1] = a
    elseif not o.model then
      o.model = a
    else
      fail("unexpected argument " .. a)
    end
  end
  if not o.model then fail("no model file given") end
  if #o.dtypes == 0 then o.dtypes = { "float32", "float16", "bfloat16" } end
  for _, d in ipairs(o.dtypes) do
    if not pcall(dtypes.check, "--dtypes", d) then
      fail("unknown dtype " .. d .. " (float32, float16, bfloat16, float64)")
    end
  end
  return o
end

local o = parse(arg)
-- The model file runs as a recipe does, but only as Lua source: compiled
-- bytecode (which LuaJIT does not verify) is refused.
local chunk, err = loadfile(o.model, "t")
if not chunk and err:find("wrong mode", 1, true) then
  fail(o.model .. " is compiled Lua bytecode; estimate-memory runs model files as Lua source only")
end
if not chunk then fail("cannot load " .. err) end
local build = chunk()
if type(build) ~= "function" then
  fail(o.model .. " must return a function that builds the model, it returned a " .. type(build))
end
local model = accel.init_empty_weights(build)
if type(model) ~= "table" or not model.named_parameters then
  fail(o.model .. "'s function must return a module, it returned a " .. type(model))
end

local no_split = {}
for _, name in ipairs(o.no_split) do no_split[name] = true end
local n = o.num_processes
local rows = { { "dtype", "largest layer", "total size", "AdamW stage 0", "stage 1", "stage 2", "stage 3" } }
for _, dtype in ipairs(o.dtypes) do
  local sizes = module_sizes.compute(model, dtype)
  local largest = model_parts.largest_layer(model_parts.direct(model, ""), sizes, no_split)
  local total = sizes[""]
  rows[#rows + 1] = { dtype, memory_size.format(largest), memory_size.format(total),
                      memory_size.format(4 * total), memory_size.format(2 * total + 2 * total / n),
                      memory_size.format(total + 3 * total / n), memory_size.format(4 * total / n + largest) }
end

local widths = {}
for _, row in ipairs(rows) do
  for i, cell in ipairs(row) do widths[i] = math.max(widths[i] or 0, #cell) end
end
print(string.format("Memory for %s: %d parameters; training is per process on %d process%s", o.model,
                    model:num_parameters(), n, n == 1 and "" or "es"))
for _, row in ipairs(rows) do
  local cells = {}
  for i, cell in ipairs(row) do cells[i] = i < #row and (cell .. string.rep(" ", widths[i] - #cell)) or cell end
  print(table.concat(cells, "  "))
end
