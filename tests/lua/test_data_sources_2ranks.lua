-- nproc: 2
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/data_sources_check.lua")(check)
check.done("test_data_sources_2ranks")
