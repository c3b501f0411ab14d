-- nproc: 3
local dir = arg[0]:match("(.*/)")
local check = dofile(dir .. "helpers/check.lua")
dofile(dir .. "helpers/accelerate_metrics.lua")(check, dir)
