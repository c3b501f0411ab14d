-- The experts a model holds after accel.parallel.expert_parallel split them
-- over ep (expert_parallel.lua), for what the Accelerator does around them:
-- data parallel and FSDP leave them out (every ep rank holds other experts,
-- so neither a broadcast from the first rank nor a flat buffer over the
-- shard group fits them; expert_sync.lua synchronises their gradients, and
-- fsdp/expert_sharding.lua shards them apart over the ranks holding the
-- same ones), and the full weights gather them from their ep ranks.
local core = require("accel.core")
local named_tensors = require("accel.util.named_tensors")

local expert_parameters = {}

-- The mixture-of-experts blocks expert_parallel split, with their names:
-- {{name, block}, ...}, model order.
function expert_parameters.blocks(model)
  local out = {}
  for _, pair in ipairs(model:named_modules()) do
    if rawget(pair[2], "ep") ~= nil and rawget(pair[2], "num_experts") ~= nil then out[#out + 1] = pair end
  end
  return out
end

-- The split experts' parameters as a set (tensor -> true), and how many.
function expert_parameters.set(model)
  local set, n = {}, 0
  for _, pair in ipairs(expert_parameters.blocks(model)) do
    for _, p in ipairs(pair[2].experts:parameters()) do
      if not set[p] then set[p], n = true, n + 1 end
    end
  end
  return set, n
end

-- `list` without the split experts' parameters (all of it for an unsplit model).
function expert_parameters.without(model, list)
  local set, n = expert_parameters.set(model)
  if n == 0 then return list end
  local out = {}
  for _, p in ipairs(list) do
    if not set[p] then out[#out + 1] = p end
  end
  return out
end

-- The split blocks of `model` as data, for what names their experts:
-- {{prefix = the block's name, num_experts = E, per_rank = E / ep, ep =
-- the mesh's ep dim, fields = an expert's parameter names in order}, ...},
-- model order. A pipeline keeps that of the whole model it cut
-- (pipelined_model.lua), whose blocks its stages reach under other names.
function expert_parameters.layout(model)
  local out = {}
  for _, pair in ipairs(expert_parameters.blocks(model)) do
    local block, fields = pair[2], {}
    for name in block.experts[1]:named_parameters() do fields[#fields + 1] = name end
    out[#out + 1] = { prefix = pair[1], num_experts = block.num_experts, per_rank = #block.experts, ep = block.ep,
                      fields = fields }
  end
  return out
end

-- Every expert of every block of `layout` (expert_parameters.layout), by
-- the whole model's name, added to `state` (name -> tensor, this rank's
-- already in it): each rank's experts broadcast over ep from the rank
-- holding them. A collective over ep.
function expert_parameters.gather_layout(layout, state)
  for _, b in ipairs(layout) do
    local ep, per_rank = b.ep, b.per_rank
    -- Every rank's experts have the shapes and dtypes of this rank's in
    -- `state` (whole there, also where tp split them): the same
    -- architecture, split evenly. In the same order on every rank: the
    -- module's, not a hash table's.
    local shapes = {}
    for _, name in ipairs(b.fields) do
      shapes[#shapes + 1] = { name, state[string.format("%s.experts.%d.%s", b.prefix, ep.rank * per_rank, name)] }
    end
    for owner = 0, ep.size - 1 do
      for j = 0, per_rank - 1 do
        local index = owner * per_rank + j  -- named from 0, as the unsplit model's
        for _, pair in ipairs(shapes) do
          local name, like = pair[1], pair[2]
          local key = string.format("%s.experts.%d.%s", b.prefix, index, name)
          local t = owner == ep.rank and state[key]:detach():clone() or core.empty_like(like)
          ep:broadcast(t, owner)
          state[key] = t
        end
      end
    end
  end
  return state
end

-- The same for `model`'s own split blocks.
function expert_parameters.gather(model, state)
  return expert_parameters.gather_layout(expert_parameters.layout(model), state)
end

-- The whole model's names from `names` (the split model's, in order), its
-- blocks `layout` (expert_parameters.layout): each split block's experts,
-- all of them in index order, where its first expert's names were.
function expert_parameters.whole_names(layout, names)
  local blocks = {}
  for _, b in ipairs(layout) do blocks[#blocks + 1] = { prefix = b.prefix .. ".experts.", block = b } end
  local out, written = {}, {}
  for _, name in ipairs(names) do
    local of = nil
    for _, b in ipairs(blocks) do
      if name:sub(1, #b.prefix) == b.prefix then of = b end
    end
    if not of then
      out[#out + 1] = name
    elseif not written[of] then
      written[of] = true
      for index = 0, of.block.num_experts - 1 do
        for _, field in ipairs(of.block.fields) do out[#out + 1] = of.prefix .. index .. "." .. field end
      end
    end
  end
  return out
end

-- The whole model's {name, tensor} in the order one process's save_model
-- writes them, from `full` (gathered).
function expert_parameters.ordered(model, full)
  local names = {}
  for i, pair in ipairs(named_tensors(model)) do names[i] = pair[1] end
  local out = {}
  for i, name in ipairs(expert_parameters.whole_names(expert_parameters.layout(model), names)) do
    out[i] = { name, full[name] }
  end
  return out
end

-- The whole model's parameter names in its parameters() order: the
-- indices of one process's optimizer made on model:parameters().
function expert_parameters.whole_parameter_names(model)
  local names = {}
  for name in model:named_parameters() do names[#names + 1] = name end
  return expert_parameters.whole_names(expert_parameters.layout(model), names)
end

-- Whether a tensor's name (the whole model's) is a split expert's, of any
-- of `models`: a function(name) -> boolean.
function expert_parameters.is_expert_name(models)
  local prefixes = {}
  for _, model in ipairs(models) do
    for _, pair in ipairs(expert_parameters.blocks(model)) do prefixes[#prefixes + 1] = pair[1] .. ".experts." end
  end
  return function(name)
    for _, prefix in ipairs(prefixes) do
      if name:sub(1, #prefix) == prefix then return true end
    end
    return false
  end
end

-- The names in `weights` (full, the whole model's) of experts this rank
-- does not hold, dropped: what loading full weights into the split model takes.
function expert_parameters.local_part(model, weights)
  local out = {}
  for k, v in pairs(weights) do out[k] = v end
  for _, pair in ipairs(expert_parameters.blocks(model)) do
    local prefix, block = pair[1], pair[2]
    -- Experts are named from 0, as the unsplit model's (expert_parallel.lua).
    local first = block.ep.rank * #block.experts
    local last = first + #block.experts - 1
    local pattern = "^" .. prefix:gsub("%p", "%%%0") .. "%.experts%.(%d+)%."
    for k in pairs(weights) do
      local index = k:match(pattern)
      if index and (tonumber(index) < first or tonumber(index) > last) then out[k] = nil end
    end
  end
  return out
end

return expert_parameters
