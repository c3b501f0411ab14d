-- nproc: 3
-- The sharding checks of test_data_shard.lua, on 3 ranks.
dofile(arg[0]:match("(.*/)") .. "test_data_shard.lua")
