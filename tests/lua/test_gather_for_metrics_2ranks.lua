-- nproc: 2
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/gather_for_metrics_check.lua")(check)
check.done("test_gather_for_metrics_2ranks")
