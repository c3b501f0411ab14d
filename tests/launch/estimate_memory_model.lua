-- The model test_estimate_memory.sh estimates: 1,501,500 parameters, the
-- largest layer the first Linear (1,001,000). Built under init_empty_weights.
local nn = accel.nn
return function() return nn.Sequential(nn.Linear(1000, 1000), nn.ReLU(), nn.Linear(1000, 500)) end
