-- acc.mesh: the ranks as a device mesh with the dims pp (outermost: the
-- pipeline's stages), dp_replicate, dp_shard, cp and tp (tp innermost), "dp", dp_replicate x dp_shard flattened (the
-- ranks that see different data), "dp_cp", dp x cp (the ranks that hold
-- different tokens, over which gradients are averaged), and "dp_shard_cp",
-- dp_shard x cp (torchtitan's name: the group FSDP shards over,
-- mesh_sharding.lua) and "ep" (torchtitan's: ranks of dp_shard_cp that
-- split the experts). Each dim is a MeshDim:
--   mesh.tp.rank, mesh.tp.size, mesh.tp.ranks (global ranks, 0-based)
--   mesh.tp:all_reduce(t [, op]), mesh.tp:all_gather(t) -> list,
--   mesh.tp:reduce_scatter(output, input [, op]), mesh.tp:broadcast(t, root)
-- collectives over this rank's group along that dim (root is a rank of the
-- group). The arithmetic and its checks are the engine's
-- (engine/protocol/device_mesh.h); each group is made once, here, in the
-- same order on every rank (engine/comm/group_communicator.h).
local core = require("accel.core")
local dist = core.dist

local DeviceMesh = {}
DeviceMesh.__index = DeviceMesh

DeviceMesh.DIMS = { "pp", "dp_replicate", "dp_shard", "cp", "tp", "dp", "dp_cp", "dp_shard_cp", "ep" }

-- A flattened dim whose ranks are those of another dim when a size is 1 is
-- that dim, not a second group of the same ranks: dp_cp is dp without
-- context parallelism; dp_shard_cp is dp_shard without it, cp without FSDP;
-- ep over all of dp_shard x cp is dp_shard_cp.
local function same_as(name, config)
  if name == "dp_cp" and config.cp_size == 1 then return "dp" end
  if name == "ep" and config.ep_size == config.dp_shard_size * config.cp_size then return "dp_shard_cp" end
  if name == "dp_shard_cp" then
    if config.cp_size == 1 then return "dp_shard" end
    if config.dp_shard_size == 1 then return "cp" end
  end
end

local MeshDim = {}
MeshDim.__index = MeshDim

function MeshDim:all_reduce(t, op) return self.group:all_reduce(t, op) end
function MeshDim:all_gather(t) return self.group:all_gather(t) end
function MeshDim:reduce_scatter(output, input, op) return self.group:reduce_scatter(output, input, op) end
function MeshDim:broadcast(t, root) return self.group:broadcast(t, root) end
function MeshDim:barrier() return self.group:barrier() end
function MeshDim:__tostring()
  return string.format("MeshDim(%s: rank %d of %d, ranks {%s})", self.name, self.rank, self.size,
                       table.concat(self.ranks, ", "))
end

-- `config`: an accel.ParallelismConfig.
function DeviceMesh.new(config)
  local facts = dist.device_mesh(config.dp_replicate_size, config.dp_shard_size, config.cp_size, config.tp_size,
                                 config.pp_size, config.ep_size)
  local mesh = setmetatable({ config = config }, DeviceMesh)
  for _, name in ipairs(DeviceMesh.DIMS) do
    local f, alias = facts[name], same_as(name, config)
    mesh[name] = alias and mesh[alias] or setmetatable({
      name = name, rank = f.rank, size = f.size, ranks = f.ranks,
      group = dist.new_group("mesh." .. name, f.ranks),
    }, MeshDim)
  end
  return mesh
end

function DeviceMesh.is(value)
  return getmetatable(value) == DeviceMesh
end

function DeviceMesh:__tostring()
  local parts = {}
  for _, name in ipairs(DeviceMesh.DIMS) do
    parts[#parts + 1] = string.format("%s %d/%d", name, self[name].rank, self[name].size)
  end
  return "DeviceMesh(" .. table.concat(parts, ", ") .. ")"
end

return DeviceMesh
