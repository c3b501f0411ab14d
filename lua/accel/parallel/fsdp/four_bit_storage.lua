-- FSDP's sharding of a QLoRA base (ZeRO-3 / FULL_SHARD): every Linear4bit
-- of the model keeps 1/N of its codes and absmax (whole blocks,
-- engine/quant/four_bit_shards.h) over the shard group, gathering the whole
-- weight for each forward and backward as a unit's float parameters are.
-- The codes are frozen buffers, not parameters: no flat parameter holds
-- them, no gradient is reduce-scattered for them, and the optimizer never
-- sees them. A save (or load) of the full model has them whole for its
-- duration (with_whole).
local core = require("accel.core")

local four_bit_storage = {}

local function layers(model)
  local out = {}
  for _, m in ipairs(model:modules()) do
    if m.__name == "Linear4bit" then out[#out + 1] = m end
  end
  return out
end

-- Shards the model's Linear4bit layers over `dims`' shard group (the world
-- off a mesh, whose group is made here once). Returns how many.
function four_bit_storage.shard(model, dims)
  local found = layers(model)
  if #found == 0 then return 0 end
  local group
  if dims.mesh then
    group = dims.mesh.dp_shard_cp.group
  else
    local ranks = {}
    for r = 0, dims.num_processes - 1 do ranks[#ranks + 1] = r end
    group = rawget(dims, "four_bit_group") or core.dist.new_group("fsdp.four_bit_storage", ranks)
    rawset(dims, "four_bit_group", group)
  end
  for _, m in ipairs(found) do m:shard_storage_(group) end
  return #found
end

-- fn() with every sharded Linear4bit's storage whole (a collective); the
-- layers keep their shards again afterwards, of what fn left there.
function four_bit_storage.with_whole(model, fn)
  local sharded = {}
  for _, m in ipairs(layers(model)) do
    local group = m:storage_group()
    if group then
      m:unshard_storage_()
      sharded[#sharded + 1] = { m, group }
    end
  end
  local results = { pcall(fn) }
  for _, entry in ipairs(sharded) do entry[1]:shard_storage_(entry[2]) end
  if not results[1] then error(results[2], 0) end
  return unpack(results, 2, table.maxn(results))
end

return four_bit_storage
