-- nproc: 4
-- Sequence parallelism composed with the other dims of the mesh on 4 ranks:
-- CP 2 x TP 2 + SP (each cp rank's part of the sequence split again over
-- tp, attention gathering it over tp and going around the cp ring) and
-- TP 2 x FSDP 2 + SP (each decoder layer an FSDP unit, the vocabulary-
-- parallel loss, accumulating over 2 micro-steps): 10 AdamW steps with
-- clipping of the small Llama under llama's sp_plan give one process's
-- losses, gradient norms and weights within 1e-5 (TP 2 x DP 2 + SP:
-- test_tensor_parallel_4ranks.lua).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local tp_check = dofile(arg[0]:match("(.*/)") .. "helpers/tensor_parallel_check.lua")

tp_check.run(check, { cp = 2, tp = 2, plan = "default", sequence_parallel = true })
local by_layer = accel.FullyShardedDataParallelPlugin{ transformer_layer_cls = "LlamaDecoderLayer" }
local acc = tp_check.run(check, { dp_shard = 2, tp = 2, plan = "vocab_parallel", sequence_parallel = true,
                                  accumulation = 2, fsdp_plugin = by_layer })
check.truthy(acc.sharding ~= nil, "the model is sharded over dp_shard")
if acc.process_index == 0 then print(string.format("sequence parallel x cp, x fsdp (4 ranks): %d checks passed", check.passed)) end
