-- FSDP of the experts split over ep (torchtitan's dp_shard_mod_ep,
-- "efsdp"; docs/api/parallelism.md, "Training with experts split over
-- ep"): under dp_shard x cp > ep_size the ranks of a dp_shard x cp group at
-- the same place in their ep groups hold the same experts, and shard them
-- as FSDP shards the other weights: each keeps 1/(dp_shard x cp / ep) of
-- them. The experts are a second ShardedModel (stage 3, shard_model.lua)
-- over that group, its units the mixture-of-experts blocks (their experts
-- gathered for the block's forward and backward, released after), with
-- dp_replicate holding replicas of its shards as of the others' (HSDP).
-- mesh_sharding.lua makes it before the other parameters' sharded model;
-- expert_sync.lua drives it beside that one (its divisor: items over
-- dp x cp, as now), model_layout.lua gathers it with it.
--
-- Both sharded models point the one optimizer at their shards. A sharded
-- model converts the optimizer's state from and to its layout before
-- sharding, in which the other's parameters must still be what the
-- optimizer holds: this one is pointed last at an optimizer of the experts
-- alone (`own`), so that its layout is theirs, and the other, made after
-- it, takes this one's shards as parameters of its own layout. The state
-- in the layout before either (what checkpoints key by name) is put
-- together from both by name (optimizer_by_name.lua).
local core = require("accel.core")
local args = require("accel.util.args")
local shard_model = require("accel.parallel.fsdp.shard_model")
local tp_parameters = require("accel.parallel.tp_parameters")
local expert_parameters = require("accel.parallel.expert_parameters")
local optimizer_names = require("accel.parallel.checkpoint.optimizer_names")
local optimizer_by_name = require("accel.parallel.checkpoint.optimizer_by_name")

local dist = core.dist

local ExpertSharding = {}
ExpertSharding.__index = ExpertSharding

-- The ranks of mesh.dp_shard_cp at this rank's place in their ep groups
-- (an ep group is ep consecutive ranks of it, engine/protocol/device_mesh.h).
local function shard_ranks(mesh)
  local ranks = {}
  for i, rank in ipairs(mesh.dp_shard_cp.ranks) do
    if (i - 1) % mesh.ep.size == mesh.ep.rank then ranks[#ranks + 1] = rank end
  end
  return ranks
end

-- Whether the experts are sharded: FSDP on (`mesh`'s sharding) and more
-- ranks in dp_shard x cp than in ep.
function ExpertSharding.applies(mesh, model)
  local _, split = expert_parameters.set(model)
  return mesh.ep.size > 1 and split > 0 and mesh.dp_shard_cp.size > mesh.ep.size
end

-- The experts of `model` sharded (its optimizer `optimizer`, at the
-- settings of the other parameters' sharding), before those are.
function ExpertSharding.new(mesh, model, optimizer, settings, bucket_bytes, device)
  if settings.stage ~= 3 then
    args.error(string.format("accel.Accelerator: experts sharded over dp_shard x cp / ep need FSDP FULL_SHARD "
                             .. "(stage 3), got stage %d", settings.stage))
  end
  local experts = expert_parameters.set(model)
  local units, split = {}, {}
  for _, pair in ipairs(expert_parameters.blocks(model)) do
    units[#units + 1] = { module = pair[2], params = pair[2].experts:parameters() }
    -- Each expert's gradients in every backward, zeros for no rows
    -- (expert_parallel.lua): every rank's reduce-scatters in the same order.
    rawset(pair[2], "runs_every_expert", true)
  end
  for _, entry in ipairs(tp_parameters.list(model)) do
    if entry[3] and experts[entry[2]] then split[#split + 1] = entry[2] end
  end
  -- The optimizer's groups of the experts alone (the model's tensors, by
  -- the names of the optimizer's), made before sharding.
  local by_name = {}
  for name, p in model:named_parameters() do
    if experts[p] then by_name[name] = p end
  end
  local before, own_groups, index = optimizer_names(optimizer, { model }), {}, 0
  for g, n in ipairs(before.group_sizes) do
    local params = {}
    for i = index, index + n - 1 do params[#params + 1] = by_name[before.names[i]] end
    own_groups[g], index = { params = params }, index + n
  end
  local ranks = shard_ranks(mesh)
  local group = dist.new_group("mesh.ep_shard." .. table.concat(ranks, "_"), ranks)
  local sharded = shard_model(model, optimizer, settings, bucket_bytes, device, {
    shard = group, replicate = mesh.dp_replicate.group, tp = mesh.tp.group, tp_split = split,
  }, { units = units })
  local own = core.optim.SGD(own_groups, { lr = 0 })
  local own_layout = optimizer_names(own, { model })
  sharded:shard_optimizer(own)
  -- The layout the other parameters' sharded model will convert from: this
  -- model's shards in place of the experts.
  return setmetatable({ sharded = sharded, group = group, ep = mesh.ep, own_layout = own_layout,
                        others_layout = optimizer_names(optimizer, { model }) }, ExpertSharding)
end

-- The experts' shards, whose gradients are this rank's slices.
function ExpertSharding:shards() return self.sharded:shards() end

-- The experts' gradients divided as every other's: by the items all dp x
-- cp ranks counted (`num_items`, this rank's; each rank of the shard group
-- and its replicas gives its ep group's, which summed over them are all dp
-- x cp ranks'), or by the number of dp x cp ranks (ep per rank of them).
function ExpertSharding:finalize(num_items)
  local items = self.ep.size
  if num_items and num_items > 0 then
    local count = core.tensor({ num_items }, { dtype = "float64" })
    self.ep:all_reduce(count)
    items = math.floor(count:item() + 0.5)
  end
  self.sharded:finalize(items)
end

-- The squares of the experts' gradient norm, summed over their shard group
-- (and tp) by the sharded model, then over ep (other experts): a 1-element
-- float64 tensor. A collective.
function ExpertSharding:squared_norm()
  local sq = self.sharded:grad_norm(2):double():pow(2):view(1):contiguous()
  self.ep:all_reduce(sq)
  return sq
end

-- The entries of `state` (an engine state dict) whose parameter `layout`
-- names, keyed by name.
local function named_part(state, layout, who)
  local kept = {}
  for key, t in pairs(state) do
    local index = key:match("^state%.(%d+)%.")
    if not index or layout.names[tonumber(index)] then kept[key] = t end
  end
  return optimizer_by_name.named(kept, layout.names, 1, who)
end

-- The optimizer's state in its layout before sharding (`original`,
-- optimizer_names.lua's), from `others` (the other parameters' sharded
-- model) and this one. A collective.
function ExpertSharding:full_optimizer_state(others, optimizer, original)
  local who = "the sharded experts' optimizer state"
  local named = named_part(others:full_optimizer_state(optimizer), self.others_layout, who)
  for key, t in pairs(named_part(self.sharded:full_optimizer_state(optimizer), self.own_layout, who)) do
    named[key] = t
  end
  return optimizer_by_name.indexed(named, original.names, optimizer:state_dict(), who, original.group_sizes)
end

-- The reverse: each sharded model takes its parameters' state from `state`
-- (in the layout `original`), and the optimizer holds both.
function ExpertSharding:load_full_optimizer_state(others, optimizer, state, original)
  local who = "the optimizer state loaded"
  local named = optimizer_by_name.named(state, original.names, 1, who)
  local function load(sharded, layout)
    sharded:load_full_optimizer_state(optimizer, optimizer_by_name.indexed(named, layout.names, optimizer:state_dict(),
                                                                           who, layout.group_sizes))
    return optimizer:state_dict()
  end
  local merged = load(others, self.others_layout)
  for key, t in pairs(load(self.sharded, self.own_layout)) do
    if key:match("^state%.") then merged[key] = t end
  end
  optimizer:load_state_dict(merged)
end

return ExpertSharding
