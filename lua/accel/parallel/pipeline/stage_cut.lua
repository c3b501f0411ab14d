-- Which of a model's layers each pipeline stage holds, by module names (as
-- torchtitan's lists of FQNs per model chunk): `layer_names` is the
-- model's top-level layers in order, the embeddings and the head counted
-- as layers ({"embed_tokens", "layers.0", ..., "norm", "lm_head"}).
--   stage_cut.split(names, { stages = 4 })                        -- even
--   stage_cut.split(names, { stages = 4, layers_per_stage = 3 })
--   stage_cut.split(names, { stages = 2, module_names_per_stage = {{...}, {...}} })
-- returns one list of names per stage (1-based stages, the schedules'
-- numbering: stage s runs on pp rank (s - 1) % pp_size). Pure logic: the
-- model is cut by these names before any stage is built.
local args = require("accel.util.args")

local stage_cut = {}

local where = "accel.parallel.pipeline.stage_cut.split"

local function preview(names)
  if #names <= 6 then return table.concat(names, ", ") end
  return table.concat({ names[1], names[2], names[3], "...", names[#names - 1], names[#names] }, ", ")
end

-- Stage sizes of an even split: the first L % S stages hold one more.
local function even_sizes(count, stages)
  local sizes = {}
  for s = 1, stages do sizes[s] = math.floor(count / stages) + (s <= count % stages and 1 or 0) end
  return sizes
end

-- torchtitan's layers_per_stage: ceil(L / k) stages, the last holding the rest.
local function sized_by(count, stages, k)
  args.positive_integer(where, "layers_per_stage", k)
  local needed = math.ceil(count / k)
  if needed ~= stages then
    args.error(string.format("%s: layers_per_stage = %d cuts the model's %d layers into %d stages, but the pipeline "
                             .. "has %d (pp_size x pp_virtual_stages)", where, k, count, needed, stages))
  end
  local sizes = {}
  for s = 1, stages do sizes[s] = math.min(k, count - (s - 1) * k) end
  return sizes
end

local function cut(names, sizes)
  local out, next_layer = {}, 1
  for s, size in ipairs(sizes) do
    out[s] = {}
    for i = next_layer, next_layer + size - 1 do out[s][#out[s] + 1] = names[i] end
    next_layer = next_layer + size
  end
  return out
end

-- Explicit lists: each name a layer, once, every layer covered, each stage
-- a run of consecutive layers after the previous stage's.
local function checked_lists(names, stages, lists)
  if type(lists) ~= "table" or #lists ~= stages then
    args.error(string.format("%s: module_names_per_stage must list %d stages (pp_size x pp_virtual_stages), got %s",
                             where, stages, type(lists) == "table" and tostring(#lists) or type(lists)))
  end
  local position = {}
  for i, name in ipairs(names) do position[name] = i end
  local placed, expected = {}, 1
  for s, list in ipairs(lists) do
    if type(list) ~= "table" or #list == 0 then
      args.error(string.format("%s: stage %d of module_names_per_stage holds no layers", where, s))
    end
    for _, name in ipairs(list) do
      local i = position[name]
      if not i then
        args.error(string.format("%s: stage %d names %q, which is not a layer of the model (%d layers: %s)",
                                 where, s, tostring(name), #names, preview(names)))
      end
      if placed[name] then
        args.error(string.format("%s: %q is in stage %d and again in stage %d", where, name, placed[name], s))
      end
      if i ~= expected then
        args.error(string.format("%s: stage %d lists %q where %q comes next: each stage holds consecutive layers in "
                                 .. "the model's order", where, s, name, names[expected]))
      end
      placed[name], expected = s, expected + 1
    end
  end
  if expected <= #names then
    args.error(string.format("%s: module_names_per_stage leaves out %q and the %d layer(s) after it",
                             where, names[expected], #names - expected))
  end
  return lists
end

function stage_cut.split(layer_names, options)
  local o = args.options(where, options, { stages = 1, layers_per_stage = args.NONE,
                                           module_names_per_stage = args.NONE })
  args.positive_integer(where, "stages", o.stages)
  if type(layer_names) ~= "table" or #layer_names == 0 then
    args.error(where .. ": the model's layer names must be a non-empty list")
  end
  local seen = {}
  for i, name in ipairs(layer_names) do
    if type(name) ~= "string" then args.error(string.format("%s: layer name %d is a %s", where, i, type(name))) end
    if seen[name] then args.error(string.format("%s: the model lists layer %q twice (%d and %d)", where, name, seen[name], i)) end
    seen[name] = i
  end
  if o.module_names_per_stage then
    if o.layers_per_stage then
      args.error(where .. ": give layers_per_stage or module_names_per_stage, not both")
    end
    return checked_lists(layer_names, o.stages, o.module_names_per_stage)
  end
  if o.stages > #layer_names then
    args.error(string.format("%s: %d stages for a model of %d layers (%s): each stage needs one", where, o.stages,
                             #layer_names, preview(layer_names)))
  end
  local sizes = o.layers_per_stage and sized_by(#layer_names, o.stages, o.layers_per_stage)
                or even_sizes(#layer_names, o.stages)
  return cut(layer_names, sizes)
end

return stage_cut
