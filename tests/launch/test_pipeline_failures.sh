# A pipeline stage that raises, dies or stalls mid-schedule
# (accel.parallel.pipeline.stage_runtime): the run ends with the pp rank and
# the action named, within --timeout, and leaves no process; also through
# the Accelerator with the pipeline composed (PP 2 x FSDP 2, PP 2 x TP 2,
# the zero-bubble schedule under PP 2 x DP 2), one rank of a stage failing
# while its dp or tp peers wait in their collectives.
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

# The Accelerator's training loop over a tiny Llama cut in 2 stages, the
# mesh's sizes from $2; FAULT ($3) is Lua run on global rank $4 in each of
# its decoder layers' forwards, where `calls` counts them.
write_accelerated() {
  cat >"$work/$1.lua" <<LUA
local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ $2 } }
accel.set_seed(1)
local model = accel.models.from_config{ model_type = "llama", vocab_size = 32, hidden_size = 16,
  intermediate_size = 32, num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
if acc.mesh.tp.size > 1 then model = accel.parallel.tensor_parallel(model, acc.mesh) end
local calls = 0
if acc.process_index == $4 then
  for _, layer in ipairs({ model.model.layers[1], model.model.layers[2] }) do
    local forward = layer.forward
    layer.forward = function(...)
      calls = calls + 1
      $3
      return forward(...)
    end
  end
end
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-3 })
model, opt = acc:prepare(model, opt)
local x = accel.randint(0, 32, { 8, 8 })
for _ = 1, 2 do
  local out = model{ input_ids = x, labels = x }
  acc:backward(out.loss)
  opt:step()
  opt:zero_grad()
end
print("the steps ran")
LUA
}

# The first stage holds both decoder layers (5 pieces cut 3 + 2); global
# rank 1 is its second dp_shard rank (of PP 2 x FSDP 2), its second tp rank
# (of PP 2 x TP 2).
write_accelerated fsdp_raises 'pp_size = 2, dp_shard_size = 2' 'if calls == 3 then error("the layer exploded") end' 1
run_accel "$work/fsdp_raises.lua" --nproc 4 --threads 1 --timeout 20
expect "PP 2 x FSDP 2, one rank of a stage raises: the run fails" [ "$status" -eq 1 ]
expect "PP 2 x FSDP 2: well before the timeout" [ "$elapsed" -lt 18 ]
expect "PP 2 x FSDP 2: the rank and the action are named" \
  contains "$err" "accel.parallel.pipeline.stage_runtime: pp rank 0, action"
expect "PP 2 x FSDP 2: with its error" contains "$err" "the layer exploded"
expect "PP 2 x FSDP 2: no step ran" eval '[[ "$out" != *"the steps ran"* ]]'
expect "PP 2 x FSDP 2: no process left" no_survivors

write_accelerated tp_dies 'pp_size = 2, tp_size = 2' 'if calls == 2 then os.exit(3) end' 1
run_accel "$work/tp_dies.lua" --nproc 4 --threads 1 --timeout 20
expect "PP 2 x TP 2, one rank of a stage dies: the run fails" [ "$status" -ne 0 ]
expect "PP 2 x TP 2: well before the timeout" [ "$elapsed" -lt 18 ]
expect "PP 2 x TP 2: the rank is named" contains "$err" "accel-run: rank 1 failed with exit code 3"
expect "PP 2 x TP 2: no step ran" eval '[[ "$out" != *"the steps ran"* ]]'
expect "PP 2 x TP 2: no process left" no_survivors

write_accelerated zb_stalls 'pp_size = 2, dp_replicate_size = 2, pp_schedule = "InterleavedZeroBubble", pp_virtual_stages = 2, pp_microbatches = 4' \
  'if calls == 5 then os.execute("sleep 60") end' 0
run_accel "$work/zb_stalls.lua" --nproc 4 --threads 1 --timeout 3
expect "zero bubble at PP 2 x DP 2, a stage stalls: the run fails" [ "$status" -ne 0 ]
expect "zero bubble: at the timeout, not after the sleep" [ "$elapsed" -lt 40 ]
expect "zero bubble: a waiting rank's action is named" \
  contains "$err" "accel.parallel.pipeline.stage_runtime: pp rank 1, action"
expect "zero bubble: no process left" no_survivors

finish
