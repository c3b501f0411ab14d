-- The pipeline's and ep's settings from the launch (tests/launch/test_parallelism_options.sh):
-- accel.ParallelismConfig{} takes them, as it takes the mesh's other sizes.
local config = accel.ParallelismConfig{}
if os.getenv("RANK") == "0" then print("config from the launch: " .. tostring(config)) end
