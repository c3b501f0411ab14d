-- nproc: 2
-- Packing without cross-talk under context parallelism (cp 2): packed rows
-- split by context_parallel_split, their documents cut across both ranks'
-- chunks, give every document the logits it gets alone (1e-5) and the
-- packed loss, and the gradients averaged over cp are one process's, on the
-- architectures ring attention takes (llama, qwen2, mixtral); position_ids
-- that jump up between documents are refused, naming the tokens.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local packed = dofile(arg[0]:match("(.*/)") .. "helpers/packed_check.lua")

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ cp_size = 2 } }
local mesh = acc.mesh
local first = packed.documents({ 5, 7, 4 }, 1)
local second = packed.documents({ 6, 3 }, 2)
local row1, starts1 = packed.row(first)
local row2, starts2 = packed.row(second, 7)
local batch = {
  input_ids = accel.cat({ row1.input_ids, row2.input_ids }, 1),
  position_ids = accel.cat({ row1.position_ids, row2.position_ids }, 1),
  labels = accel.cat({ row1.labels, row2.labels }, 1),
}
for _, arch in ipairs(packed.architectures) do
  if arch.ring then
    local function build()
      accel.set_seed(7)
      return accel.models.from_config(arch.config):train()
    end
    local reference = build()
    local alone_first, alone_second = packed.alone(reference, first), packed.alone(reference, second)
    local expected = reference(batch).loss
    reference:zero_grad()
    expected:backward()

    local model = accel.parallel.context_parallel(build(), mesh)
    local out = model(accel.parallel.context_parallel_split(batch, mesh))
    local logits = accel.parallel.context_parallel_gather(out.logits, mesh)
    for b, set in ipairs({ { first, starts1, alone_first }, { second, starts2, alone_second } }) do
      for i, d in ipairs(set[1]) do
        check.near(logits:narrow(1, b, 1):narrow(2, set[2][i], d:numel()), set[3][i].logits, 1e-5,
                   string.format("%s under cp 2: row %d document %d's logits as alone", arch.name, b, i))
      end
    end
    local all = {}
    for _, a in ipairs(alone_first) do all[#all + 1] = a end
    for _, a in ipairs(alone_second) do all[#all + 1] = a end
    check.near(out.loss:item(), packed.mean_loss(all), 1e-5, arch.name .. " under cp 2: the documents' mean loss")
    check.near(out.loss:item(), expected:item(), 1e-5, arch.name .. " under cp 2: one process's packed loss")
    out.loss:backward()
    local reference_grads = {}
    for name, p in reference:named_parameters() do reference_grads[name] = p.grad end
    for name, p in model:named_parameters() do
      local g = p.grad:clone()
      mesh.cp:all_reduce(g, "mean")
      check.near(g, reference_grads[name], 1e-5, arch.name .. " under cp 2: " .. name .. "'s gradient")
    end
  end
end

local jumping = { input_ids = row1.input_ids, position_ids = row1.position_ids:clone() }
jumping.position_ids[1][6] = 9  -- the second document starting at 9 after the first's last position, 4
check.raises(function() accel.parallel.context_parallel_split(jumping, mesh) end, "positions jumping up",
             "position_ids jump from 4 to 9 between tokens 5 and 6 of row 1")
check.done("packed sequences under context parallelism")
