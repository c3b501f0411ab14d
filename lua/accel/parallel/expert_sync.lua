-- Expert parallelism in the Accelerator (parallel_dims.lua applies it in
-- prepare_model when the mesh's ep dim has more than one rank and the
-- recipe split the model's experts with accel.parallel.expert_parallel
-- before making its optimizer, as it applies tensor parallelism): the
-- model's other parameters are data parallel or FSDP over dp_shard x cp as
-- without experts (both leave the experts out: expert_parameters.lua), and
-- the experts' gradients synchronise here.
--
-- Each expert's gradient already holds every token its ep group routed to
-- it: the all-to-all's backward brings the other ranks' tokens' gradients
-- home. The ranks holding the same experts ("expert replicas": the ranks of
-- this rank's dp x cp group at the same place in their ep groups, e.g. 0
-- and 2 of dp_shard 4 with ep 2) saw other tokens, so on a synchronising
-- step the experts' gradients are summed over the replicas and divided as
-- every other gradient is: by the items all dp x cp ranks counted, or by
-- the number of dp x cp ranks. The sum over ep groups and replicas is then
-- one process's gradient over the whole batch.
--
-- Under FSDP with dp_shard x cp > ep_size the experts are themselves
-- sharded over the replicas of dp_shard x cp (fsdp/expert_sharding.lua):
-- their sharded model reduce-scatters their gradients in every backward,
-- as the other one does, and its finalize sums them over dp_replicate and
-- divides them by the same divisor. Else they stay whole and are
-- all-reduced over the replicas here.
--
-- Under a pipeline (PP x EP, pipeline/pipeline_parallel.lua) the model is
-- this rank's stages, FSDP-sharded over their dp_shard group, which is
-- the ep group (no replicas: the experts stay whole); the schedule's
-- micro-batches accumulate the experts' gradients and finalize, once it
-- has run, divides them as above. A rank's stages may hold no experts.
--
-- ExpertSync wraps the model's gradient synchronisation (the GradientSync
-- seam, engine/parallel/gradient_sync.h) and does both. It runs in the
-- Accelerator's backward only: a recipe's own loss:backward() synchronises
-- the other parameters, as DDP's does, but not the experts, so the
-- optimizer's step refuses experts whose gradients did not synchronise.
local core = require("accel.core")
local args = require("accel.util.args")
local expert_parameters = require("accel.parallel.expert_parameters")
local clip_to_norm = require("accel.parallel.clip_to_norm")
local tp_parameters = require("accel.parallel.tp_parameters")

local dist = core.dist

local expert_sync = {}

local ExpertSync = {}
ExpertSync.__index = ExpertSync

-- The ranks of `mesh.dp_cp` at this rank's place in their ep groups: an ep
-- group is ep consecutive ranks of a dp_shard x cp group, which is itself
-- consecutive in dp x cp (engine/protocol/device_mesh.h).
local function replica_ranks(mesh)
  local ranks = {}
  for i, rank in ipairs(mesh.dp_cp.ranks) do
    if ((i - 1) % mesh.dp_shard_cp.size) % mesh.ep.size == mesh.ep.rank then ranks[#ranks + 1] = rank end
  end
  return ranks
end

-- `sharding`: the experts' sharding (fsdp/expert_sharding.lua), or nil
-- where they stay whole. `params` holds the experts' gradients: their
-- shards, or the experts' parameters.
function ExpertSync.new(inner, model, mesh, sharding)
  local self = { inner = inner, sharding = sharding, dp_cp = mesh.dp_cp, ep = mesh.ep, synchronised = false }
  if sharding then
    self.params = sharding:shards()
  else
    local set = expert_parameters.set(model)
    self.params = {}
    for _, p in ipairs(model:parameters()) do
      if set[p] then self.params[#self.params + 1] = p end
    end
    local ranks = replica_ranks(mesh)
    self.replicas = #ranks > 1 and dist.new_group("mesh.ep_replicas." .. mesh.ep.rank, ranks) or nil
    self.replica_count = #ranks
  end
  return setmetatable(self, ExpertSync)
end

-- The experts' sharded model beside the other parameters' synchronisation.
function ExpertSync:set_sync(sync)
  self.inner:set_sync(sync)
  if self.sharding then self.sharding.sharded:set_sync(sync) end
end
function ExpertSync:sync() return self.inner:sync() end
function ExpertSync:caller_finishes_backward()
  self.inner:caller_finishes_backward()
  if self.sharding then self.sharding.sharded:caller_finishes_backward() end
end

function ExpertSync:end_backward()
  self.inner:end_backward()
  if self.sharding then self.sharding.sharded:end_backward() end
end

-- A collective over dp x cp when num_items counts. Without num_items (an
-- early synchronisation on a micro-step that accumulates: sync_each_batch,
-- trigger_sync_in_backward) the experts' gradients are averaged over the
-- replicas only, as the reducer averages the others over the ranks: equal
-- on every replica, and the replicas' sum at the step's synchronisation
-- is then the sum it would have been.
function ExpertSync:finalize(num_items)
  self.inner:finalize(num_items)
  if self.sharding then
    self.sharding:finalize(num_items)
    self.synchronised = true
    return
  end
  local divisor = num_items == nil and self.replica_count or self.dp_cp.size
  if num_items and num_items > 0 then
    local items = core.tensor({ num_items }, { dtype = "float64" })
    self.dp_cp:all_reduce(items)
    divisor = items:item()
  end
  core.no_grad(function()
    for _, p in ipairs(self.params) do
      local g = p.grad
      if g then
        if self.replicas then self.replicas:all_reduce(g) end
        g:div_(divisor)
      end
    end
  end)
  self.synchronised = true
end

-- Before the optimizer's step: the experts' gradients, if any, synchronised
-- since the optimizer's last zero_grad (else only a plain loss:backward()
-- ran: refused, on every rank alike).
function ExpertSync:check_synchronised()
  if self.synchronised then return end
  local any = false
  for _, p in ipairs(self.params) do any = any or p.grad ~= nil end
  if not any then return end
  args.error("Accelerator: under ep_size > 1 the experts' gradients synchronise in acc:backward(loss), not in "
             .. "a recipe's own loss:backward() (" .. tostring(self.ep) .. ")")
end

-- The optimizer's zero_grad: what the next step takes comes from the
-- backward passes after it.
function ExpertSync:zero_grad() self.synchronised = false end

function expert_sync.applies(dims)
  return dims:ep() ~= nil
end

-- Refuses `model` (the recipe's, whole) whose experts expert_parallel did
-- not split.
function expert_sync.refuse_unsplit(model, dims)
  local _, split = expert_parameters.set(model)
  if split == 0 then
    args.error(string.format("Accelerator:prepare: the mesh has ep_size = %d, but the model's experts are not "
                             .. "split: apply accel.parallel.expert_parallel(model, acc.mesh) before making its "
                             .. "optimizer (%s)", dims.mesh.ep.size, tostring(dims.mesh.config)))
  end
end

-- Under a pipeline the recipe's model was checked before it was cut
-- (pipeline_parallel.lua): a rank's stages may hold no experts (the
-- embeddings and the head alone), and its ExpertSync then holds none.
function expert_sync.apply(layout, dims)
  if not layout.pipelined then expert_sync.refuse_unsplit(layout.model, dims) end
  layout.expert_sync = ExpertSync.new(layout.sync, layout.model, dims.mesh, layout.expert_sharding)
  layout.sync = layout.expert_sync
end

-- torch.nn.utils.clip_grad_norm_ over the global norm of the prepared
-- models (`layouts`) under ep: the other parameters' squares as without
-- experts (a sharded model's over its slices, by its grad_norm; or the
-- replicated gradients'),
-- the experts' summed over ep (the replicas hold the same ones; sharded
-- experts' over their slices first, by their sharded model's grad_norm);
-- under tp (`tp`, or nil) the squares of what is split over it summed over
-- tp first (tp_parameters.lua). Returns the norm, a 0-dim tensor, on every rank.
function expert_sync.clip_grad_norm(layouts, max_norm, norm_type, tp)
  if norm_type ~= nil and norm_type ~= 2 then
    args.error("Accelerator:clip_grad_norm: under ep_size > 1 only the L2 norm (norm_type 2) is supported yet")
  end
  local function zero() return core.zeros(1, { dtype = "float64" }) end
  -- [expert or not][split over tp or not]: summed squares.
  local sq = { [true] = { [true] = zero(), [false] = zero() }, [false] = { [true] = zero(), [false] = zero() } }
  local holders, ep = {}, nil
  -- Summed over ep already (expert_sharding.lua).
  local sharded_experts = zero()
  for _, layout in ipairs(layouts) do
    local sync = layout.expert_sync
    local experts = {}
    if sync then
      ep = sync.ep
      if sync.sharding then
        sharded_experts = sharded_experts + sync.sharding:squared_norm()
      else
        for _, p in ipairs(sync.params) do experts[p] = true end
      end
    end
    if layout.sharded then
      sq[false][false] = sq[false][false] + layout.sharded:grad_norm(2):double():pow(2):view(1)
    end
    for _, entry in ipairs(tp_parameters.list(layout.model)) do
      local p, expert = entry[2], experts[entry[2]] == true
      if p.grad and (expert or not layout.sharded) then
        local part = sq[expert][entry[3] ~= nil]
        sq[expert][entry[3] ~= nil] = part + p.grad:detach():double():pow(2):sum():view(1)
      end
    end
    -- The slices and the experts, or the parameters (model_layout.lua).
    for _, t in ipairs(layout:gradient_holders()) do holders[#holders + 1] = t end
  end
  if tp then
    for _, expert in ipairs({ true, false }) do
      sq[expert][true] = sq[expert][true]:contiguous()
      tp:all_reduce(sq[expert][true])
    end
  end
  local experts = (sq[true][true] + sq[true][false]):contiguous()
  ep:all_reduce(experts)
  local total = experts + sharded_experts + sq[false][true] + sq[false][false]
  return clip_to_norm(holders, max_norm, total:sqrt():squeeze():float())
end

return expert_sync
