-- nproc: 2
-- A tiny Mixtral with its experts split over ep (accel.parallel.expert_parallel,
-- ep 2 of dp_shard 2): each rank keeps half the experts, under their whole
-- model's names, and trains on its half of the batch, tokens exchanged with
-- ProcessGroup:all_to_all. The first step's loss and gradients and 10 AdamW
-- steps' losses and weights equal one process's on the whole batch within
-- 1e-5 (float32), also when one rank's experts get no row; the
-- all-to-all's rows and counts (a run of none among them), and its
-- gradient, as the ranks expect; misuse refused naming the sizes.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local core = require("accel.core")

local TINY = { model_type = "mixtral", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2,
               num_local_experts = 4, num_experts_per_tok = 2 }
local function tiny(overrides)
  local cfg = {}
  for k, v in pairs(TINY) do cfg[k] = v end
  for k, v in pairs(overrides or {}) do cfg[k] = v end
  accel.set_seed(1)
  return accel.models.from_config(cfg):train()
end
local function ids(step)
  accel.set_seed(100 + step)
  return accel.randint(0, 32, { 4, 8 })
end

accel.PartialState()  -- the world first: an MPI group is made of it
local mesh = accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ dp_shard_size = 2, ep_size = 2 })
local ep = mesh.ep
check.equal(ep.size, 2, "ep size")

-- The exchange itself: rank r sends r + 1 rows to rank 0 and 2 to rank 1,
-- in two runs each; rows carry their sender and position.
do
  local counts = ep.rank == 0 and accel.tensor({ { 1, 0 }, { 1, 1 } }):long() or accel.tensor({ { 1, 1 }, { 0, 2 } }):long()
  local total = counts:sum():item()
  local x = (core.arange(1, total + 1):float() + 100 * ep.rank):unsqueeze(-1):expand(total, 3):contiguous()
  x:requires_grad_(true)
  local rows, received = ep.group:all_to_all(x, counts)
  local expected_counts = ep.rank == 0 and { { 1, 0 }, { 1, 1 } } or { { 1, 1 }, { 0, 2 } }
  check.near(received, expected_counts, 0, "the counts every rank sends here")
  local expected = ep.rank == 0 and { 1, 101, 102 } or { 2, 3, 103, 104 }
  check.near(rows:select(2, 1), expected, 0, "the rows every rank sends here, in rank order")
  -- Each received row's gradient is its value times 5; each sent row's comes back to it.
  local objective = (rows * rows:detach() * 5):sum()
  objective:backward()
  check.near(x.grad:select(2, 1), x:detach():select(2, 1) * 5, 0, "the rows' gradients, sent back")
  check.raises(function() ep.group:all_to_all(x, accel.tensor({ 1, 1 }):long()) end,
               "counts of another shape", "must be [group size, parts] = [2, parts], not [2]")
  check.raises(function() ep.group:all_to_all(x, accel.tensor({ { 1, 0 }, { 0, 1 } }):long()) end,
               "counts that are not the rows", "the counts send 2 rows, and the tensor of sizes [")
end

-- The model against one process on the whole batch.
local model, reference = tiny(), tiny()
accel.parallel.expert_parallel(model, mesh)
local block = model.model.layers[1].block_sparse_moe
check.equal(#block.experts, 2, "each rank keeps 2 of 4 experts")
local names = {}
for name in pairs(model:state_dict()) do
  if name:find("layers.0.block_sparse_moe.experts.", 1, true) and name:find("w1", 1, true) then names[#names + 1] = name end
end
table.sort(names)
check.equal(table.concat(names, ","), string.format("model.layers.0.block_sparse_moe.experts.%d.w1.weight,"
            .. "model.layers.0.block_sparse_moe.experts.%d.w1.weight", 2 * ep.rank, 2 * ep.rank + 1),
            "the kept experts' names are the whole model's")
check.raises(function() accel.parallel.expert_parallel(tiny{ num_local_experts = 3 }, mesh) end,
             "experts that do not divide", "has 3 experts, which do not divide by ep_size = 2")

local ref_params = {}
for name, p in reference:named_parameters() do ref_params[name] = p end
local function is_expert(name) return name:find(".experts.", 1, true) ~= nil end
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
local ref_opt = accel.optim.AdamW(reference:parameters(), { lr = 1e-2 })
-- Gradients as one process's mean over the whole batch: the experts' hold every
-- rank's tokens already, each rank's mean loss counting half; the others are averaged.
local function sync_gradients()
  for name, p in model:named_parameters() do
    if p.grad then
      if is_expert(name) then p.grad:div_(ep.size) else ep:all_reduce(p.grad); p.grad:div_(ep.size) end
    end
  end
end
local function compare(what, field)
  local compared = 0
  for name, p in model:named_parameters() do
    local a, b = p, ref_params[name]
    if field then a, b = p[field], b[field] end
    check.near(a, b, 1e-5, string.format("%s %s on ep rank %d", what, name, ep.rank))
    compared = compared + 1
  end
  check.truthy(compared > 0, "parameters compared")
end
for step = 1, 10 do
  local x = ids(step)
  local mine = x:narrow(1, 2 * ep.rank + 1, 2)
  local loss = model{ input_ids = mine, labels = mine }.loss
  loss:backward()
  sync_gradients()
  local mean = loss:detach():clone()
  ep:all_reduce(mean)
  local ref_loss = reference{ input_ids = x, labels = x }.loss
  ref_loss:backward()
  check.near(mean:item() / ep.size, ref_loss:item(), 1e-5, string.format("step %d's loss", step))
  if step == 1 then compare("the first step's gradient of", "grad") end
  opt:step(); opt:zero_grad()
  ref_opt:step(); ref_opt:zero_grad()
end
compare("after 10 steps,")

-- A rank whose experts get no row: the first layer routes every token to
-- experts 3 and 4 (rank 1's), so rank 0's run none, yet it takes part in
-- both exchanges' backward (its rows' gradients come back from rank 1).
do
  local split, whole = accel.parallel.expert_parallel(tiny(), mesh), tiny()
  for _, m in ipairs({ split, whole }) do
    local block = m.model.layers[1].block_sparse_moe
    local route = block.route
    rawset(block, "route", function(self, h)
      local x, top, chosen = route(self, h)
      return x, top, chosen:clone():copy_(accel.tensor({ 3, 4 }):long():expand(chosen:size(1), 2))
    end)
  end
  local x = ids(11)
  local mine = x:narrow(1, 2 * ep.rank + 1, 2)
  local loss = split{ input_ids = mine, labels = mine }.loss
  loss:backward()
  local whole_loss = whole{ input_ids = x, labels = x }.loss
  whole_loss:backward()
  local mean = loss:detach():clone()
  ep:all_reduce(mean)
  check.near(mean:item() / ep.size, whole_loss:item(), 1e-5, "the loss with every token routed to rank 1's experts")
  local theirs = {}
  for name, p in whole:named_parameters() do theirs[name] = p end
  for name, p in split:named_parameters() do
    if p.grad then
      if is_expert(name) then p.grad:div_(ep.size) else ep:all_reduce(p.grad); p.grad:div_(ep.size) end
      local expected = theirs[name].grad
      check.near(p.grad, expected or core.zeros_like(p), 1e-5, "with rank 0's experts idle, the gradient of " .. name)
    end
  end
end
check.done("expert parallel")
