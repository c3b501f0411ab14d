-- nproc: 2
-- Sequence parallelism with tensor parallelism over 2 ranks: the
-- activations between attention and MLP split over the sequence. The ops
-- alone (a tp group's gather_sequence and reduce_scatter_sequence, forward
-- and backward) against one process's arithmetic; a sequence_parallel
-- RMSNorm's and LayerNorm's parameter gradients summed over the group and a
-- dropout's mask the one process's; then a small Llama (dropout off) trained 10 AdamW steps with
-- clipping under llama's sp_plan equals one process within 1e-5 (logits
-- gathered; logits split to the vocabulary-parallel loss, accumulating over
-- 2 micro-steps); lengths that do not divide by tp_size are refused; a
-- forward without gradients runs as TP alone (no_grad logits of any length
-- and greedy generation equal the unsplit model's); plans without sequence
-- kinds are refused.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")
local nn = accel.nn

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
local tp = acc.mesh.tp
local rank = tp.rank
local B, T, H = 2, 6, 3
local half = T / 2

-- Rank r's own tensor of these sizes (every rank can make every rank's).
local function of_rank(r, sizes)
  accel.set_seed(10 + r)
  return accel.randn(sizes)
end
local function part(t, dim, r) return t:narrow(dim, r * t:size(dim) / 2 + 1, t:size(dim) / 2) end

-- gather_sequence: forward joins the ranks' parts; backward sums every
-- rank's gradient of the whole (each rank's is partial) and keeps its part.
local whole = of_rank(0, { B, T, H })
local x = part(whole, 2, rank):clone():requires_grad_(true)
local y = tp.group:gather_sequence(x, 2)
check.near(y, whole, 0, "gather_sequence joins the parts along the sequence")
local weights = { of_rank(0, { B, T, H }), of_rank(1, { B, T, H }) }
y:mul(weights[rank + 1]):sum():backward()
check.near(x.grad, part(weights[1] + weights[2], 2, rank), 1e-6, "gather_sequence's backward: the summed gradient's part")

-- reduce_scatter_sequence: forward sums the ranks' tensors, each keeping its
-- part; backward gathers the parts' gradients into the whole one.
local mine = of_rank(rank, { B, T, H }):requires_grad_(true)
local summed = tp.group:reduce_scatter_sequence(mine, 2)
local total = of_rank(0, { B, T, H }) + of_rank(1, { B, T, H })
check.equal(table.concat(summed:size(), "x"), B .. "x" .. half .. "x" .. H, "reduce_scatter_sequence's sizes")
check.near(summed, part(total, 2, rank), 1e-6, "reduce_scatter_sequence: this rank's part of the sum")
local upstream = { of_rank(2, { B, half, H }), of_rank(3, { B, half, H }) }
summed:mul(upstream[rank + 1]):sum():backward()
check.near(mine.grad, accel.cat(upstream, 2), 0, "reduce_scatter_sequence's backward gathers the gradient")

-- Another dim (the last, counted from the end).
check.near(tp.group:reduce_scatter_sequence(of_rank(rank, { B, T, 4 }), -1),
           part(of_rank(0, { B, T, 4 }) + of_rank(1, { B, T, 4 }), 3, rank), 1e-6, "reduce_scatter_sequence on dim -1")
check.near(tp.group:gather_sequence(part(whole, 1, rank), 1), whole, 0, "gather_sequence on dim 1")
check.raises(function() tp.group:reduce_scatter_sequence(accel.zeros(B, 7, H), 2) end, "an odd length",
             "sizes [2, 7, 3] has length 7", "does not divide by the group's 2 ranks")

-- A sequence_parallel RMSNorm or LayerNorm: the output on this rank's
-- positions, the parameters' gradients the whole sequence's (summed over the
-- group) on both ranks.
local Holder = nn.Module:extend("Holder")
function Holder:init(name, child) self[name] = child end
for _, Norm in ipairs({ nn.RMSNorm, nn.LayerNorm }) do
  local name = tostring(Norm)
  local one = Holder("norm", Norm(H))
  local out = one.norm(whole)
  out:mul(weights[1]):sum():backward()
  local split = accel.parallel.tensor_parallel(Holder("norm", Norm(H)), acc.mesh, { norm = "sequence_parallel" })
  check.truthy(split.norm.sequence_parallel, name .. " is marked sequence_parallel")
  check.equal(split.norm.__name, name, name .. " is kept")
  local split_out = split.norm(part(whole, 2, rank))
  check.near(split_out, part(out, 2, rank), 1e-6, name .. " sequence_parallel on this rank's positions")
  split_out:mul(part(weights[1], 2, rank)):sum():backward()
  for key, p in split.norm:named_parameters() do
    check.near(p.grad, one.norm[key].grad, 1e-5, name .. "." .. key .. "'s gradient summed over the tp group")
    check.truthy(rawget(split.norm, key) == p and p.is_leaf, name .. "." .. key .. " is its parameter again")
  end
end

-- A sequence_parallel Dropout applies its part of the whole sequence's mask,
-- as one process draws it.
accel.set_seed(7)
local dropped = nn.Dropout(0.3):train()(whole)
local dropout_plan = { drop = "sequence_parallel" }
local holder = Holder("drop", nn.Dropout(0.3))
accel.parallel.tensor_parallel(holder, acc.mesh, dropout_plan)
accel.set_seed(7)
check.near(holder.drop(part(whole, 2, rank)), part(dropped, 2, rank), 0, "dropout's mask is one process's, in part")
check.near(holder.drop:eval()(part(whole, 2, rank)), part(whole, 2, rank), 0, "no dropout in eval mode")

-- Llama under sp_plan: the layers and names.
local sp = accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, nil, { sequence_parallel = true })
local layer = sp.model.layers[1]
check.truthy(layer.input_layernorm.sequence_parallel and sp.model.norm.sequence_parallel, "norms sequence_parallel")
check.equal(layer.self_attn.q_proj.input, "gathered", "q_proj takes the attention's gathered input")
check.equal(layer.mlp.up_proj.input, "gathered", "up_proj takes the MLP's gathered input")
check.truthy(layer.self_attn.o_proj.sequence_output and layer.mlp.down_proj.sequence_output, "o/down reduce-scatter")
check.equal(sp.lm_head.input, "sequence", "lm_head gathers the sequence itself")
check.truthy(sp:state_dict()["model.layers.0.input_layernorm.weight"] ~= nil, "parameter names kept")
check.raises(function() sp{ input_ids = accel.zeros({ 2, 7 }, { dtype = accel.int64 }) } end, "a length of 7",
             "sequence parallelism splits the sequence over tp_size 2", "model.embed_tokens got a sequence of length 7")
-- Without gradients the model runs as TP alone (every rank the whole
-- sequence), so an SP model evaluates any length and generates.
accel.set_seed(3)
local unsplit = accel.models.from_config(tp_check.tiny):eval()
accel.set_seed(3)
local sp_model = accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, nil,
                                                { sequence_parallel = true }):eval()
accel.set_seed(11)
local prompt = accel.randint(3, tp_check.tiny.vocab_size, { 2, 6 })
accel.no_grad(function()
  for _, length in ipairs({ 6, 5 }) do
    local ids = prompt:narrow(2, 1, length)
    check.near(sp_model{ input_ids = ids }.logits, unsplit{ input_ids = ids }.logits, 1e-5,
               "no_grad logits of a length of " .. length .. " equal the unsplit model's")
    local generated = sp_model:generate(ids, { max_new_tokens = 6, do_sample = false })
    check.truthy(generated:equal(unsplit:generate(ids, { max_new_tokens = 6, do_sample = false })),
                 "greedy generation from a prompt of " .. length .. " equals the unsplit model's")
  end
end)
check.raises(function() sp_model{ input_ids = prompt:narrow(2, 1, 5), labels = prompt:narrow(2, 1, 5) } end,
             "with gradients a length of 5 is still refused", "got a sequence of length 5")
check.raises(function() sp_model{ input_ids = prompt, logits_to_keep = 1 } end, "logits_to_keep on a split sequence",
             "logits_to_keep while sequence parallelism splits the sequence")
check.raises(function()
  accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, require("accel.models.llama").tp_plan,
                                 { sequence_parallel = true })
end, "a plan without sequence kinds", "sequence_parallel = true, but the plan uses none of the sequence-parallel kinds")
check.raises(function() accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), acc.mesh, nil, { sp = true }) end,
             "an unknown option", "unknown option 'sp'")

tp_check.run(check, { dp_replicate = 1, tp = 2, plan = "default", sequence_parallel = true })
tp_check.run(check, { dp_replicate = 1, tp = 2, plan = "vocab_parallel", sequence_parallel = true, accumulation = 2 })
if rank == 0 then print(string.format("sequence parallel (2 ranks): %d checks passed", check.passed)) end
