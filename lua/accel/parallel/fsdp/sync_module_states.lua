-- A sharded model starts from the main process's weights on every rank, as
-- FSDP's sync_module_states: its parameters reach the others flat parameter
-- by flat parameter (engine/parallel/flat_parameter.h), its buffers here.
-- So ranks other than the main process may build the model under
-- accel.init_empty_weights (meta tensors, no memory) and never hold it whole.
local core = require("accel.core")
local args = require("accel.util.args")
local gathering = require("accel.gathering")

local dist = core.dist

local sync_module_states = {}

-- This rank's model as the others compare it: "parameter float32[3, 8]"
-- by name, and the names of its tensors on the meta device, sorted.
local function describe(model)
  local layout, meta = {}, {}
  local function add(kind, name, t)
    layout[name] = string.format("%s %s%s", kind, t.dtype, args.shape(t))
    if t.device == "meta" then meta[#meta + 1] = name end
  end
  for name, p in model:named_parameters() do add("parameter", name, p) end
  for name, b in model:named_buffers() do add("buffer", name, b) end
  table.sort(meta)
  return { layout = layout, meta = meta }
end

local function first_names(names)
  local shown = table.concat(names, ", ", 1, math.min(#names, 3))
  if #names > 3 then shown = shown .. string.format(" and %d more", #names - 3) end
  return shown
end

-- The first name whose entry differs between two layouts, in name order.
local function first_difference(main, other)
  local names = {}
  for name in pairs(main) do names[#names + 1] = name end
  for name in pairs(other) do
    if main[name] == nil then names[#names + 1] = name end
  end
  table.sort(names)
  for _, name in ipairs(names) do
    if main[name] ~= other[name] then return name end
  end
end

-- A collective: every rank fails alike, naming the culprit, when the main
-- process holds meta tensors (it has no values to give) or when a rank's
-- parameters and buffers differ from the main process's in name, dtype or
-- shape. Returns whether this rank's model has meta tensors.
function sync_module_states.check(world, model, where)
  local mine = describe(model)
  local all = gathering.gather_object(world, mine)
  local main = all[1]
  if #main.meta > 0 then
    args.error(string.format("%s: the main process's model has %s on the meta device; every rank takes the "
                             .. "main process's weights, so only the other ranks may build the model empty "
                             .. "(accel.init_empty_weights): build it with its weights on the main process",
                             where, first_names(main.meta)))
  end
  for r = 2, #all do
    local name = first_difference(main.layout, all[r].layout)
    if name then
      args.error(string.format("%s: rank %d's model differs from the main process's, whose weights every rank "
                               .. "takes: '%s' is %s on rank 0 and %s on rank %d", where, r - 1, name,
                               main.layout[name] or "absent", all[r].layout[name] or "absent", r - 1))
    end
  end
  return #mine.meta > 0
end

-- The model's buffers on `device` with the main process's values: a meta
-- buffer gets new memory there first (one shared by several modules stays
-- shared). A collective.
function sync_module_states.sync_buffers(model, device, world_size)
  local moved = {}
  for _, m in ipairs(model:modules()) do
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      if m._buffers[key] and v ~= nil then
        if not moved[v] then
          if v.device == "meta" then
            moved[v] = core.empty(v:size(), { dtype = v.dtype, device = device })
          else
            moved[v] = v.device == device and v or v:to(device)
          end
        end
        rawset(m, key, moved[v])
      end
    end
  end
  if world_size > 1 then
    core.no_grad(function()
      for _, b in ipairs(model:buffers()) do dist.broadcast(b, 0) end
    end)
  end
end

return sync_module_states
