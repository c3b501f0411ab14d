-- What a rank holds under FSDP on the device mesh, after training with
-- tensor_parallel_check.lua (o: its options, tp = n):
--   fsdp_mesh_check.shares(check, acc, model, opt, o, what)
-- The shards span the shard group, mesh.dp_shard_cp (dp_shard x cp; dp_shard
-- without context parallelism): each flat parameter's shard is 1/its size
-- (up to padding), the optimizer steps the shards alone and keeps state of
-- their size only, the model's parameters are empty between steps, the
-- gradients were reduce-scattered and the parameters gathered over that
-- group; replicas (dp_replicate) hold equal shards.
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

local fsdp_mesh_check = {}

-- The elements of this rank's model before sharding: its tp slices and the
-- parameters whole on every tp rank, from a model built and split afresh
-- (no collective: each rank slices its own).
local function local_numel(mesh, tp)
  accel.set_seed(1)
  local model = accel.models.from_config(tp_check.tiny)
  if tp > 1 then model = accel.parallel.tensor_parallel(model, mesh) end
  local n = 0
  for _, p in ipairs(model:parameters()) do n = n + p:numel() end
  return n
end

-- Each slot of the optimizer's state (AdamW's exp_avg, exp_avg_sq), its
-- elements summed over the parameters it steps; 0-dim slots (step) left out.
local function state_numel(optimizer)
  local per_slot = {}
  for key, t in pairs(optimizer:state_dict()) do
    local slot = key:match("^state%.%d+%.(.+)$")
    if slot and t:dim() > 0 then per_slot[slot] = (per_slot[slot] or 0) + t:numel() end
  end
  return per_slot
end

function fsdp_mesh_check.shares(check, acc, model, opt, o, what)
  local mesh = acc.mesh
  local group = mesh.dp_shard_cp
  local shards = group.size
  local sharded = acc._models[1].sharded
  check.equal(sharded:stage(), 3, what .. ": FULL_SHARD")
  check.equal(acc.distributed_type, "FSDP", what .. ": distributed_type")
  local layout = sharded:flat_parameters(opt.optimizer)
  local total, shard_total, any_split = 0, 0, false
  for k, flat in ipairs(layout.flats) do
    check.equal(flat.shards, shards, string.format("%s: flat parameter %d's shards span dp_shard x cp", what, k))
    check.equal(flat.shard_rank, group.rank, string.format("%s: this rank's shard of flat %d", what, k))
    check.equal(flat.shard_numel, math.ceil(flat.numel / shards),
                string.format("%s: flat parameter %d's shard is 1/%d of its %d elements", what, k, shards, flat.numel))
    check.equal(flat.shard:numel(), flat.shard_numel, string.format("%s: flat %d's shard tensor", what, k))
    total, shard_total = total + flat.numel, shard_total + flat.shard_numel
    any_split = any_split or flat.split_over_tp
  end
  check.equal(total, local_numel(mesh, o.tp), what .. ": the flat parameters hold this rank's (tp) parameters")
  check.equal(any_split, o.tp > 1, what .. ": flat parameters of tp-split parameters exist under tp only")
  local stepped = 0
  for _, p in ipairs(opt.optimizer:params()) do stepped = stepped + p:numel() end
  check.equal(stepped, shard_total, what .. ": the optimizer steps the shards alone")
  local slots = state_numel(opt.optimizer)
  check.truthy(slots.exp_avg ~= nil and slots.exp_avg_sq ~= nil, what .. ": AdamW's state is there")
  for slot, n in pairs(slots) do
    check.equal(n, shard_total, string.format("%s: the optimizer's %s is the shards' size", what, slot))
  end
  check.truthy(shard_total * shards < total + shards * #layout.flats,
               string.format("%s: %d shard elements on this rank of %d", what, shard_total, total))
  for name, p in model:named_parameters() do
    check.equal(p:numel(), 0, what .. ": " .. name .. " is released between steps")
  end
  local counts = group.group:counts()
  check.truthy(counts.reduce_scatter > 0 and counts.all_gather > 0,
               what .. ": gradients reduce-scattered and parameters gathered over the shard group")
  if mesh.dp_replicate.size > 1 then
    check.truthy(mesh.dp_replicate.group:counts().all_reduce > 0, what .. ": gradient slices all-reduced over dp_replicate")
    for k, flat in ipairs(layout.flats) do
      local replicas = mesh.dp_replicate:all_gather(flat.shard:detach())
      check.near(replicas[2], replicas[1], 0, string.format("%s: flat %d's shard equal on both replicas", what, k))
    end
  end
  return shard_total, total
end

return fsdp_mesh_check
