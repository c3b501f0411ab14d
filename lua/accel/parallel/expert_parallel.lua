-- accel.parallel.expert_parallel(model, mesh): splits the experts of every
-- mixture-of-experts block (Mixtral's MixtralSparseMoeBlock) over the
-- mesh's ep dim, torchtitan's and Megatron-Core's expert parallelism: ep
-- rank r keeps experts r * E/ep to (r + 1) * E/ep - 1 (their names stay the
-- whole model's, experts.4.w1.weight on rank 1 of 2 with 8), and each
-- block's forward
--   1. routes its tokens as one process does (the block's route: the
--      router is replicated),
--   2. sends each (token, choice) row to the rank holding its expert, in
--      expert order (ProcessGroup:all_to_all, engine/parallel/expert_exchange.h:
--      the counts first, per expert, then the rows),
--   3. runs each local expert on the rows every rank sent it,
--   4. sends the outputs back and sums them into their tokens, weighted by
--      the router, in the order one process adds them.
-- Dropless: every row reaches its expert, however uneven the routing.
-- Gradients flow back through both exchanges, so each expert's weights get
-- the gradient of every rank's tokens routed to it; the other weights get
-- this rank's tokens' only, and are averaged over the ranks that see other
-- data as usual. Every ep rank must have built the same model (same seed
-- or weights). The router's aux loss is this rank's tokens', as under data
-- parallelism. Returns the model; E must divide by ep_size (refused,
-- naming both).
local core = require("accel.core")
local args = require("accel.util.args")
local nn = require("accel.nn")

-- The forward of a block whose experts are split (above): `h` [B, T, H].
local function expert_parallel_forward(self, h)
  local B, T, H = h:size(1), h:size(2), h:size(3)
  local x, top, chosen = self:route(h)
  local ep, experts = self.ep, self.num_experts
  local per_rank = math.floor(experts / ep.size)
  -- One row per (token, choice), ordered by expert, then token: each rank's
  -- experts' rows together, and every token's choices in expert order.
  local tokens = B * T
  local row_expert = chosen:reshape(-1)
  local row_token = core.arange(1, tokens + 1, { device = x.device }):repeat_interleave(self.top_k)
  local _, order = ((row_expert - 1) * tokens + row_token):sort()
  row_token = row_token:index_select(1, order)
  local row_weight = top:reshape(-1):index_select(1, order):unsqueeze(-1)
  local numbers = core.arange(1, experts + 1, { device = x.device })
  local counts = row_expert:unsqueeze(-1):eq(numbers):long():sum(1):view(ep.size, per_rank)
  -- Under autocast the rows travel in its dtype (bf16: half of float32's
  -- bytes), both ways: the experts' linears would cast them to it anyway,
  -- and their outputs are in it, so the values are those of float32 rows.
  local rows_out = x:index_select(1, row_token)
  local travel = core.amp.autocast_dtype(x.device)
  if travel then rows_out = rows_out:to(travel) end
  local received, received_counts = ep.group:all_to_all(rows_out, counts)
  -- Which local expert (1-based) each received row is for: every rank's rows
  -- come in expert order.
  local pieces = {}
  for s = 1, ep.size do
    for j = 1, per_rank do
      local n = received_counts[s][j]:item()
      if n > 0 then pieces[#pieces + 1] = core.full({ n }, j, { dtype = "int64", device = x.device }) end
    end
  end
  local local_expert = #pieces > 0 and core.cat(pieces) or core.zeros({ 0 }, { dtype = "int64" })
  -- Zeros that stay on the autograd graph (received times 0), not
  -- zeros_like: a rank whose experts got no row must still run both
  -- exchanges' backward, which its peers wait for.
  local outputs = received * 0
  -- An expert with no rows does not run, and its weights get no gradient
  -- (the optimizer skips them, as one process's), unless FSDP shards the
  -- experts (fsdp/expert_sharding.lua, which marks the block): then every
  -- local expert runs, also on no rows, so that its weights' gradients
  -- (zeros) come in the same order on every rank holding the same experts,
  -- as the reduce-scatters of their flat shards need.
  local every = rawget(self, "runs_every_expert") == true
  for j, expert in ipairs(self.experts) do
    local rows = local_expert:eq(j):nonzero()
    if every or rows:size(1) > 0 then
      rows = rows:view(-1)
      outputs = outputs:index_add(1, rows, expert(received:index_select(1, rows)):to(outputs.dtype))
    end
  end
  local back = ep.group:all_to_all(outputs, received_counts)
  local out = core.zeros_like(x)
  out:index_add_(1, row_token, (back * row_weight):to(out.dtype))
  return out:view(B, T, H)
end

local function is_moe_block(m)
  return type(m.route) == "function" and m.experts ~= nil and rawget(m, "ep") == nil
end

return function(model, mesh)
  if mesh == nil or mesh.ep == nil then
    args.error("accel.parallel.expert_parallel: expected a device mesh (acc.mesh), got " .. tostring(mesh))
  end
  local ep = mesh.ep
  local split = 0
  for _, pair in ipairs(model:named_modules()) do
    local name, block = pair[1], pair[2]
    if is_moe_block(block) then
      local experts = #block.experts
      if experts % ep.size ~= 0 then
        args.error(string.format("accel.parallel.expert_parallel: %s has %d experts, which do not divide by "
                                 .. "ep_size = %d", name, experts, ep.size))
      end
      local per_rank = math.floor(experts / ep.size)
      local first = ep.rank * per_rank
      local kept = {}
      for i = 1, per_rank do kept[i] = block.experts[first + i] end
      block.experts = nn.ModuleList(kept, { index_base = first })
      rawset(block, "ep", ep)
      rawset(block, "num_experts", experts)
      -- The block's own forward, for this instance: its routing is the
      -- class's, its experts' work split (above).
      rawset(block, "forward", expert_parallel_forward)
      split = split + 1
    end
  end
  if split == 0 then
    args.error("accel.parallel.expert_parallel: the model has no mixture-of-experts block (a module with experts "
               .. "and a route method, as Mixtral's block_sparse_moe)")
  end
  return model
end
