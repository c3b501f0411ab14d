-- nproc: 2
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/accumulation_check.lua")(check)
check.done("test_accumulation_2ranks")
