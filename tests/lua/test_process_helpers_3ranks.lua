-- nproc: 3
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
dofile(arg[0]:match("(.*/)") .. "helpers/process_helpers_check.lua")(check)
check.done("test_process_helpers_3ranks")
