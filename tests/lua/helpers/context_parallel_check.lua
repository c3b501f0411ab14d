-- What the context-parallel tests share beyond training (tensor_parallel_check.lua
-- trains) and ring attention alone (ring_attention_check.lua):
--   cp_check.layout(check, mesh)   the load-balanced split, its inverse, and
--                                  what is refused, naming the lengths
--   cp_check.ignored_labels(check, o)  labels with -100 spread unevenly over
--                                  the cp ranks: the loss and one SGD step equal
--                                  one process's, so the scaling of each rank's
--                                  loss and of the gradients is exact
--                                  (o: {tp = n, cp = n}, the world's sizes)
local F = accel.nn.functional
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

local cp_check = {}

-- The global positions rank r holds of a sequence of T: chunks r and
-- 2 x cp - 1 - r of 2 x cp.
local function held_positions(T, cp)
  local size, out = T / (2 * cp.size), {}
  for _, chunk in ipairs({ cp.rank, 2 * cp.size - 1 - cp.rank }) do
    for i = 0, size - 1 do out[#out + 1] = chunk * size + i end
  end
  return out
end

function cp_check.layout(check, mesh)
  local cp = mesh.cp
  local T = 4 * cp.size
  local ids = accel.arange(0, 2 * T, { dtype = accel.int64 }):view(2, T)
  local labels = ids + 100
  local part = accel.parallel.context_parallel_split({ input_ids = ids, labels = labels }, mesh)
  local positions = held_positions(T, cp)
  check.equal(part.input_ids:size(2), T / cp.size, "tokens per cp rank")
  check.near(part.position_ids[1], positions, 0, "this rank's chunks, as global positions")
  check.near(part.input_ids[2], accel.tensor(positions) + T, 0, "the second row's tokens at those positions")
  -- Shifted before splitting: each position's label is the next token's, -100 after the last.
  local shifted = {}
  for i, p in ipairs(positions) do shifted[i] = p == T - 1 and -100 or p + 101 end
  check.near(part.shift_labels[1], shifted, 0, "labels shifted across chunk boundaries, then split")
  check.near(accel.parallel.context_parallel_gather(part.input_ids, mesh), ids, 0, "gather undoes split")
  check.near(accel.parallel.context_parallel_gather(part.shift_labels, mesh):narrow(2, 1, T - 1),
             labels:narrow(2, 2, T - 1), 0, "gathered shift_labels are the labels shifted")
  local q = accel.randn({ 1, 2, T, 3 })
  check.near(accel.parallel.context_parallel_gather(accel.parallel.context_parallel_part(q, mesh, 3), mesh, 3), q, 0,
             "gather undoes part along another dim")

  local odd = 2 * 2 * cp.size + 1
  check.raises(function() accel.parallel.context_parallel_split({ input_ids = accel.zeros({ 1, odd }, { dtype = accel.int64 }) }, mesh) end,
               "an odd length", string.format("the sequence length %d is not divisible by 2 x cp_size = %d (cp_size %d)",
                                               odd, 2 * cp.size, cp.size))
  check.raises(function() accel.parallel.context_parallel_split({ input_ids = ids, labels = labels:narrow(2, 1, 2) }, mesh) end,
               "labels of another shape", "labels must have the shape of input_ids")
  check.raises(function() accel.parallel.context_parallel_split({ input_ids = ids, attention_mask = (ids % 3):clamp(0, 1) }, mesh) end,
               "padding", "attention_mask has padding")
  check.raises(function() accel.parallel.context_parallel_split({ input_ids = ids, inputs_embeds = ids }, mesh) end,
               "an unknown key", "unknown key 'inputs_embeds'")

  local model = accel.parallel.context_parallel(accel.models.from_config(tp_check.tiny), mesh)
  local call = function(inputs) return function() return model(inputs) end end
  check.raises(call({ input_ids = part.input_ids }), "no position_ids", "position_ids are required")
  check.raises(call({ input_ids = part.input_ids, position_ids = part.position_ids, labels = part.input_ids }),
               "unshifted labels", "give the shift_labels that accel.parallel.context_parallel_split returns")
  local windowed = {}
  for k, v in pairs(tp_check.tiny) do windowed[k] = v end
  windowed.model_type, windowed.sliding_window = "mistral", 4
  check.raises(function() accel.parallel.context_parallel(accel.models.from_config(windowed), mesh) end,
               "a sliding window", "model.layers.0 attends within a sliding window of 4")
  check.raises(function() accel.parallel.context_parallel(accel.nn.Linear(2, 2), mesh) end,
               "a model without such attention", "has no attention that ring attention replaces")
end

function cp_check.ignored_labels(check, o)
  local V, B, T = tp_check.tiny.vocab_size, 2, 4 * o.cp
  accel.set_seed(3)
  local ids = accel.randint(0, V, { B, T })
  -- Ignored wherever the token is below a third of the vocabulary: a different count on each cp rank.
  local labels = ids:masked_fill(ids:lt(V / 3), -100)
  local function build()
    accel.set_seed(1)
    return accel.models.from_config(tp_check.tiny):train()
  end

  local reference = build()
  local expected = reference{ input_ids = ids, labels = labels }.loss
  expected:backward()
  accel.optim.SGD(reference:parameters(), { lr = 1 }):step()

  local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = o.tp, cp_size = o.cp } }
  local mesh = acc.mesh
  local model = accel.parallel.context_parallel(accel.parallel.tensor_parallel(build(), mesh), mesh)
  local opt = accel.optim.SGD(model:parameters(), { lr = 1 })
  model, opt = acc:prepare(model, opt)
  local part = accel.parallel.context_parallel_split({ input_ids = ids, labels = labels }, mesh)
  local counts = mesh.cp:all_gather(part.shift_labels:ne(-100):sum():view(1))
  check.truthy(counts[1]:item() ~= counts[2]:item(), "the cp ranks count different numbers of labels")
  local loss = model(part).loss
  check.near(loss:item(), expected:item(), 1e-5, "the loss of a split sequence is the whole sequence's mean")
  acc:backward(loss)
  opt:step()
  local full = accel.parallel.full_state_dict(model, mesh)
  for name, t in pairs(reference:state_dict()) do
    check.near(full[name], t, 1e-5, name .. " after one SGD step on unevenly ignored labels")
  end
end

return cp_check
