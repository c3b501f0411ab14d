-- nproc: 2
-- Gradient checkpointing on two ranks under plain data parallel,
-- accumulation, ZeRO stages 1-3 and FSDP FULL_SHARD (helpers/checkpoint_check.lua).
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/checkpoint_check.lua")(check)
check.done("test_checkpoint_activations_2ranks")
