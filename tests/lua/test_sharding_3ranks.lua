-- nproc: 3
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/sharding_check.lua")(check)
check.done("test_sharding_3ranks")
