-- nproc: 3
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/empty_init_check.lua")(check)
check.done("test_sharding_empty_init_3ranks")
