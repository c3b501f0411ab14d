-- nproc: 4
-- Mixed precision under the 4-rank layouts of the device mesh, against one
-- process with the same mixed precision (helpers/tensor_parallel_check.lua):
-- in bf16 (autocast, as the Accelerator runs it) TP 2 x FSDP 2 (the
-- vocabulary-parallel loss, each decoder layer a unit), HSDP 2 x 2 (each
-- step accumulated over 2 micro-steps) and CP 2 x TP 2 train 10 AdamW steps
-- with clipping of the small Llama to one process's losses, gradient norms
-- and weights within the measured tolerances (a 10% change of learning rate
-- exceeds them), every rank's flat shards, their gradients (reduce-scattered
-- over dp_shard) and AdamW state staying float32: FSDP gathers float32
-- master weights, which autocast casts per operation. In fp16 (on the CPU,
-- the loss scaler alone) TP 2 x FSDP 2 trains as float32 does, within 1e-5.
-- (2 ranks, TP 2, TP 2 + SP, CP 2, the operators' dtypes and a bf16
-- checkpoint: test_mesh_mixed_precision_2ranks.lua.)
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }
local BF16 = tp_check.bf16_tolerances
local layouts = {
  { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2, plan = "vocab_parallel", accumulation = 2, fsdp_plugin = by_layer },
  { name = "HSDP 2 x 2", dp_replicate = 2, dp_shard = 2, tp = 1, plan = "none", accumulation = 2, rows = 8,
    fsdp_plugin = by_layer },
  { name = "CP 2 x TP 2", cp = 2, tp = 2, plan = "default" },
}
for _, o in ipairs(layouts) do
  o.mixed_precision, o.tolerances = "bf16", BF16
  local acc = tp_check.run(check, o)
  if o.dp_shard then
    check.truthy(acc.mesh.dp_shard.group:counts().all_gather > 0, o.name .. ": parameters gathered over dp_shard")
  end
  acc:free_memory()
end
tp_check.run(check, { name = "TP 2 x FSDP 2", dp_shard = 2, tp = 2, plan = "vocab_parallel", accumulation = 2,
                      fsdp_plugin = by_layer, mixed_precision = "fp16" })

check.done("test_mesh_mixed_precision_4ranks")
