-- Training on the device mesh where the Accelerator puts it (test_gpu_mesh.sh):
-- on the GPU where one is visible, else on the CPU, which is how this file
-- is checked on a machine without one. `accel-run tests/gpu/mesh.lua
-- --nproc N -- LAYOUT`, LAYOUT one of
--   tp2          2 ranks: TP 2 (llama's plan), then CP 2 (ring attention)
--   tp2_fsdp2    4 ranks: TP 2 x FSDP 2 (the vocabulary-parallel loss, each
--                decoder layer a unit)
--   alone        1 rank: a ParallelismConfig of sizes 1
-- Each trains the small Llama of helpers/tensor_parallel_check.lua 10 AdamW
-- steps with clipping against one process on the same device, losses,
-- gradient norms and weights within 1e-4 (other ranks' kernels, on a GPU,
-- may round differently), and one process with a learning rate 10% higher
-- must stray beyond that. A world all-reduce on the device goes through the
-- run's own backend (NCCL's world on --backend nccl). Every rank prints
-- "mesh ok: LAYOUT on DEVICE, world BACKEND, groups BACKEND (rank R)";
-- errors on a failure.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "../lua/helpers/check.lua")
local tp_check = dofile(here .. "../lua/helpers/tensor_parallel_check.lua")

local layout = arg[1]
local TOLERANCES = { first_loss = 1e-4, loss = 1e-4, norm = 1e-4, weights = 1e-4 }
local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }
local runs = ({
  tp2 = { { name = "TP 2", tp = 2, plan = "default" },
          { name = "CP 2", tp = 1, cp = 2, plan = "default" } },
  tp2_fsdp2 = { { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2, plan = "vocab_parallel", fsdp_plugin = by_layer } },
  alone = { { name = "sizes 1", tp = 1, plan = "none" } },
})[layout]
if not runs then error("mesh.lua: the layout must be tp2, tp2_fsdp2 or alone, got " .. tostring(layout), 0) end

-- Every group of more than one rank runs over the world's backend; its
-- name ("none": no such group).
local function groups_backend(acc, what)
  local backend = "none"
  for _, name in ipairs(require("accel.parallel.device_mesh").DIMS) do
    local dim = acc.mesh[name]
    if dim.size > 1 then
      backend = dim.group:backend()
      check.equal(backend, acc.backend, string.format("%s: the %s group's backend", what, name))
    end
  end
  return backend
end

local device = accel.PartialState().device
local acc, groups
for _, o in ipairs(runs) do
  o.device, o.tolerances, o.name = device, TOLERANCES, o.name .. " on " .. device
  acc = tp_check.run(check, o)
  check.equal(acc.device, device, o.name .. ": the Accelerator's device")
  groups = groups_backend(acc, o.name)
end

-- The world, on the device: over NCCL when the run is.
local dist = require("accel.core").dist
local world = accel.tensor({ acc.process_index + 1 }):to(device)
dist.all_reduce(world)
check.near(world:cpu(), { acc.num_processes * (acc.num_processes + 1) / 2 }, 0, "a world all_reduce on " .. device)

print(string.format("mesh ok: %s on %s, world %s, groups %s (rank %d)", layout, device, acc.backend or "none", groups,
                    acc.process_index))
