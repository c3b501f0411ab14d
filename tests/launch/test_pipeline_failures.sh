# A pipeline stage that raises, dies or stalls mid-schedule
# (accel.parallel.pipeline.stage_runtime): the run ends with the pp rank and
# the action named, within --timeout, and leaves no process.
source "$(dirname "$0")/lib.sh"
export XDG_CONFIG_HOME="$work/xdg"

# FAULT is Lua run in stage 2's forward, where `calls` counts its micro-batches.
write_recipe() {
  cat >"$work/$1.lua" <<LUA
local schedules = require("accel.parallel.pipeline.schedules")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")
local nn = accel.nn
local mesh = accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ pp_size = 2, pp_microbatches = 4 })
local schedule = schedules.build("1F1B", { pp = 2, microbatches = 4 })
local calls = 0
local Faulty = nn.Module:extend("Faulty")
function Faulty:forward(x)
  calls = calls + 1
  $2
  return x
end
local stages = stage_runtime.build_stages{ layer_names = { "a", "b" }, schedule = schedule, pp_rank = mesh.pp.rank,
  build = function(name) if name == "b" then return Faulty() end return nn.Linear(3, 3) end }
local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages,
                                loss_fn = function(out, y) return accel.nn.functional.mse_loss(out, y) end }
pipe:step(accel.randn({ 8, 3 }), accel.randn({ 8, 3 }))
print("the step finished")
LUA
}

write_recipe raises 'if calls == 2 then error("the stage exploded") end'
run_accel "$work/raises.lua" --nproc 2 --threads 1 --timeout 20
expect "a stage raises: the run fails" [ "$status" -eq 1 ]
expect "a stage raises: well before the timeout" [ "$elapsed" -lt 15 ]
expect "a stage raises: the rank and the action are named" \
  contains "$err" "accel.parallel.pipeline.stage_runtime: pp rank 1, action 6 (F stage 2 micro-batch 2): "
expect "a stage raises: with its error" contains "$err" "the stage exploded"
expect "a stage raises: no process left" no_survivors

write_recipe dies 'if calls == 3 then os.exit(3) end'
run_accel "$work/dies.lua" --nproc 2 --threads 1 --timeout 20
expect "a stage dies: the run fails" [ "$status" -ne 0 ]
expect "a stage dies: well before the timeout" [ "$elapsed" -lt 15 ]
expect "a stage dies: the rank is named" contains "$err" "accel-run: rank 1 failed with exit code 3"
expect "a stage dies: nobody finished" eval '[[ "$out" != *"the step finished"* ]]'
expect "a stage dies: no process left" no_survivors

write_recipe stalls 'if calls == 1 then os.execute("sleep 60") end'
run_accel "$work/stalls.lua" --nproc 2 --threads 1 --timeout 3
expect "a stage stalls: the run fails" [ "$status" -ne 0 ]
expect "a stage stalls: at the timeout, not after the sleep" [ "$elapsed" -lt 40 ]
expect "a stage stalls: the waiting rank's action is named" \
  contains "$err" "accel.parallel.pipeline.stage_runtime: pp rank 0, action 6 (B stage 1 micro-batch 1): "
expect "a stage stalls: and the peer it waits for" \
  contains "$err" "recv from rank 1 (global rank 1) of group 'mesh.pp' (global ranks 0, 1)"
expect "a stage stalls: no process left" no_survivors

finish
