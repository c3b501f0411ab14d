-- nproc: 1
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/h2.lua")(check)
check.done("test_h2_1rank")
