-- Runs the recipe arg[1] and prints what it trained (and over which
-- backend), to compare runs exactly. Used by test_mpi.sh and test_multinode.sh.
local made
local Accelerator = accel.Accelerator
accel.Accelerator = function(...) made = Accelerator(...) return made end
dofile(arg[1])
made:print("backend " .. require("accel.core").dist.backend())
for _, entry in ipairs(made._models) do
  for name, p in entry.model:named_parameters() do
    local w = p:detach()
    made:print(string.format("weights %s %.9g %.9g", name, w:sum():item(), (w * w):sum():item()))
  end
end
