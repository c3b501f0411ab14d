-- nproc: 2 4
-- Expert parallelism through the Accelerator: a tiny Mixtral whose experts
-- the recipe split with accel.parallel.expert_parallel(model, acc.mesh),
-- prepared under ParallelismConfig{dp_shard_size, ep_size = 2 [,
-- dp_replicate_size]}: the other weights FSDP over dp_shard, the experts
-- split over ep and their gradients summed over the ranks holding the same
-- experts; under EP 2 x FSDP 4 the experts FSDP-sharded too, over the 2
-- ranks of dp_shard holding the same ones (each keeps half their
-- elements), elsewhere (dp_shard x cp = ep) whole. EP 2 (2 ranks), EP 2 x
-- FSDP 4, EP 2 x HSDP 2 x 2 and EP 2 x TP 2 (FSDP 2; each expert split
-- over tp too, Mixtral's tp_plan) (4 ranks), with accumulation: 10 AdamW
-- steps with clipping (which acts) give one
-- process's losses, gradient norms and weights within 1e-5 (float32), the
-- full weights gathered from every rank's experts (get_state_dict),
-- save_model written as one process's and load_model taking them back;
-- what is not built under ep refused naming the sizes (checkpoints of
-- training state: test_expert_checkpoint.lua).
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local expert_check = dofile(here .. "helpers/expert_check.lua")
local core = require("accel.core")

local tiny, batch, adamw = expert_check.tiny, expert_check.batch, expert_check.adamw

-- One process on the whole batches.
local reference = expert_check.reference(check)
local function compare_weights(state, what) expert_check.compare_weights(check, reference, state, what) end
local function train(run) return expert_check.train(check, reference, run) end

local world = accel.PartialState().num_processes
-- fp16 on the CPU scales the loss only: the experts' gradients are unscaled with the others'.
local runs = world == 2 and { { dp_shard = 2 }, { dp_shard = 2, accumulation = 2, mixed_precision = "fp16" } }
             or { { dp_shard = 4 }, { dp_shard = 2, dp_replicate = 2, accumulation = 2 },
                  { dp_shard = 2, tp = 2, accumulation = 2 } }
local acc, model, opt
for _, run in ipairs(runs) do acc, model, opt = train(run) end

-- save_model writes the whole model's weights; load_model gives each rank its experts back.
-- One folder for all ranks, of this run alone (the TCP and MPI runs of this test may run beside it).
local dir = acc:gather_object(string.format("%s/expert_accelerator_%d_%d", os.getenv("ACCEL_TEST_TMPDIR") or "/tmp",
                                            os.time(), math.random(1e9)))[1]
acc:save_model(model, dir)
local written = core.formats.load_weights(dir)
compare_weights(written, "save_model's file")
acc:wait_for_everyone()
local fresh = tiny()
if acc.mesh.tp.size > 1 then fresh = accel.parallel.tensor_parallel(fresh, acc.mesh) end
fresh = accel.parallel.expert_parallel(fresh, acc.mesh)
local fresh_opt
fresh, fresh_opt = acc:prepare(fresh, adamw(fresh))
acc:load_model(fresh, dir)
compare_weights(acc:get_state_dict(fresh), "load_model's weights")
check.truthy(fresh_opt ~= nil, "the second model prepared with its optimizer")

-- Refused, naming the sizes (save_state and load_state: test_expert_checkpoint.lua).
check.raises(function() opt:state_dict() end, "the optimizer's state under ep",
             "the optimizer's state_dict under ep_size = 2 is not implemented yet")
check.raises(function() acc:prepare(tiny(), adamw(tiny())) end, "experts not split",
             "apply accel.parallel.expert_parallel(model, acc.mesh) before making its optimizer")
-- A recipe's own backward leaves the experts' gradients unsynchronised: the step refuses.
local x = batch(1):narrow(1, 1, 2)
model{ input_ids = x, labels = x }.loss:backward()
check.raises(function() opt:step() end, "a plain loss:backward() under ep",
             "the experts' gradients synchronise in acc:backward(loss)")
opt:zero_grad()
check.done("expert parallel accelerator")
