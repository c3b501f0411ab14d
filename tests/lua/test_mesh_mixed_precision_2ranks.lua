-- nproc: 2
-- Mixed precision under a device mesh on 2 ranks, against one process with
-- the same mixed precision. bf16 (autocast, as the Accelerator runs it):
-- the tp group's operators carry bfloat16 and keep it, forward and
-- backward; the vocabulary-parallel loss of bfloat16 logits is computed in
-- float32, as F.cross_entropy is under autocast; ring attention given
-- bfloat16 computes in float32; TP 2 (the vocabulary-parallel loss), and
-- TP 2 + SP and CP 2 accumulating over 2 micro-steps, train 10 AdamW steps
-- with clipping of the small Llama to one process's losses, gradient norms
-- and weights within the measured tolerances of
-- helpers/tensor_parallel_check.lua (which also show that a 10% change of
-- learning rate exceeds them), the parameters, gradients and AdamW state
-- staying float32 on every rank while the row-parallel partial sums cross
-- the tp group in bfloat16; a checkpoint of a bf16 TP 2 run resumes bit for
-- bit and holds float32 weights. fp16 (on the CPU, the loss
-- scaler alone): TP 2 trains as float32 does within 1e-5, and an overflow
-- in one tp rank's gradient slice skips the step, and halves the scale, on
-- both ranks.
local here = arg[0]:match("(.*/)")
local check = dofile(here .. "helpers/check.lua")
local tp_check = dofile(here .. "helpers/tensor_parallel_check.lua")
local mc = dofile(here .. "helpers/mesh_checkpoint_check.lua")
local ring_check = dofile(here .. "helpers/ring_attention_check.lua")
local core = require("accel.core")
local ck = core.formats
local F = accel.nn.functional

local acc = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 } }
local tp, rank = acc.mesh.tp, acc.process_index

-- The tp group's operators on bfloat16: exact values (each sum fits bf16's
-- 8 bits), bfloat16 out and bfloat16 gradients back.
local function bf16(values)
  return (type(values) == "table" and accel.tensor(values) or values):to("bfloat16")
end
local function leaf(values) return bf16(values):requires_grad_() end
local base = { { 1.5, -2, 3.25, 0.125 } }          -- rank r holds (r + 1) x base
local mine = accel.tensor(base) * (rank + 1)
local function expect(t, values, what)
  check.equal(t.dtype, "bfloat16", what .. ": dtype")
  check.near(t:float(), values, 0, what)
end
local x = leaf(mine)
local y = tp.group:reduce_from(x)
expect(y, accel.tensor(base) * 3, "reduce_from sums the ranks' bfloat16")
y:backward(bf16(mine))
expect(x.grad, mine, "reduce_from's backward: the identity")
x = leaf(mine)
tp.group:copy_to(x):backward(bf16(mine))
expect(x.grad, accel.tensor(base) * 3, "copy_to's backward sums the ranks' bfloat16 gradients")
x = leaf(mine)
y = tp.group:gather_sequence(x, 2)
expect(y, accel.cat({ accel.tensor(base), accel.tensor(base) * 2 }, 2), "gather_sequence joins the ranks' bfloat16")
y:backward(bf16(accel.ones(1, 8) * (rank + 1)))
expect(x.grad, accel.ones(1, 4) * 3, "gather_sequence's backward reduce-scatters bfloat16")
x = leaf(mine)
y = tp.group:reduce_scatter_sequence(x, 2)
expect(y, (accel.tensor(base) * 3):narrow(2, 2 * rank + 1, 2), "reduce_scatter_sequence: this rank's part of the sum")
y:backward(bf16({ { rank + 1, rank + 1 } }))
expect(x.grad, { { 1, 1, 2, 2 } }, "reduce_scatter_sequence's backward all-gathers bfloat16")

-- The vocabulary-parallel loss of bfloat16 logits (inside autocast, as a
-- loss computed in the model's forward would be) is float32's, as
-- F.cross_entropy computes under autocast (computed in bfloat16, this
-- loss of 9.59 came out 9.5625).
accel.set_seed(5)
local full = (accel.randn({ 6, 32 }) * 4):to("bfloat16")
local labels = accel.randint(0, 32, { 6 })
local slice = full:narrow(2, rank * 16 + 1, 16):contiguous():requires_grad_()
local loss = core.amp.autocast(function() return accel.parallel.vocab_parallel_cross_entropy(slice, labels, tp) end)
local whole = full:float():requires_grad_()
local expected = F.cross_entropy(whole, labels + 1)
expected:backward()
check.equal(loss.dtype, "float32", "vocab_parallel_cross_entropy of bfloat16 logits: a float32 loss")
check.near(loss:item(), expected:item(), 1e-6, "vocab_parallel_cross_entropy of bfloat16 logits: float32's value")
loss:backward()
check.equal(slice.grad.dtype, "bfloat16", "the logits' gradient in their dtype")
check.near(slice.grad:float(), whole.grad:narrow(2, rank * 16 + 1, 16), 1e-3, "the logits' gradient, float32's rounded")

-- The dtypes the tp group's operators are given while fn runs (their
-- forward calls, from Lua; the gradients they carry back are checked
-- float32 on the parameters by the helper).
local methods = getmetatable(tp.group).__index
local function dtypes_seen(fn)
  local seen, originals = {}, {}
  for _, name in ipairs({ "reduce_from", "copy_to", "gather_sequence", "reduce_scatter_sequence", "gather_from",
                          "ring_attention" }) do
    local original = methods[name]
    seen[name], originals[name] = {}, original
    methods[name] = function(group, t, ...)
      seen[name][t.dtype] = true
      return original(group, t, ...)
    end
  end
  local ok, err = pcall(fn)
  for name, original in pairs(originals) do methods[name] = original end
  if not ok then error(err, 0) end
  return seen
end

local BF16 = tp_check.bf16_tolerances
local seen = dtypes_seen(function()
  tp_check.run(check, { name = "TP 2", tp = 2, plan = "vocab_parallel", mixed_precision = "bf16", tolerances = BF16 })
end)
-- Autocast's linears give bfloat16: the partial sums cross the group in it
-- (half float32's bytes, as Megatron-LM's); what enters a column-parallel
-- region is the float32 one process computes there.
check.truthy(seen.reduce_from.bfloat16, "TP 2 bf16: row-parallel partial sums all-reduced in bfloat16")
check.truthy(seen.copy_to.float32 and not seen.copy_to.bfloat16, "TP 2 bf16: copy_to given float32")
seen = dtypes_seen(function()
  tp_check.run(check, { name = "TP 2 + SP", tp = 2, plan = "default", sequence_parallel = true, accumulation = 2,
                        mixed_precision = "bf16", tolerances = BF16 })
end)
check.truthy(seen.reduce_scatter_sequence.bfloat16, "TP 2 + SP bf16: partial sums reduce-scattered in bfloat16")
check.truthy(seen.gather_sequence.float32 and not seen.gather_sequence.bfloat16,
             "TP 2 + SP bf16: the norms' float32 outputs gathered over the sequence")
check.truthy(seen.gather_from.bfloat16, "TP 2 + SP bf16: lm_head's bfloat16 logits gathered")
seen = dtypes_seen(function()
  tp_check.run(check, { name = "CP 2", tp = 1, cp = 2, plan = "default", accumulation = 2, mixed_precision = "bf16",
                        tolerances = BF16 })
end)
-- The rotary embedding's float32 cos and sin make the queries and keys
-- float32: the ring exchanges them so, as one process's attention takes them.
check.truthy(seen.ring_attention.float32 and not seen.ring_attention.bfloat16, "CP 2 bf16: ring attention's queries")
-- Given bfloat16 (outside autocast), ring attention computes in float32.
ring_check.run(check, accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ cp_size = 2 } }.mesh, "bfloat16")

-- fp16 on the CPU: float32 arithmetic, the loss scaled by powers of two.
tp_check.run(check, { name = "TP 2", tp = 2, plan = "vocab_parallel", mixed_precision = "fp16" })
-- An overflow in rank 1's slice of q_proj's gradient alone: both ranks skip.
local fp16 = accel.Accelerator{ parallelism_config = accel.ParallelismConfig{ tp_size = 2 }, mixed_precision = "fp16" }
local model = accel.parallel.tensor_parallel(accel.models.from_config(tp_check.tiny), fp16.mesh)
local opt = accel.optim.AdamW(model:parameters(), { lr = 1e-2 })
model, opt = fp16:prepare(model, opt)
accel.set_seed(2)
local ids = accel.randint(0, 32, { 2, 8 })
local q_proj = model.model.layers[1].self_attn.q_proj
for step = 1, 2 do
  fp16:backward(model{ input_ids = ids, labels = ids }.loss)
  if step == 2 and rank == 1 then q_proj.weight.grad:view(-1)[1] = math.huge end
  local before = q_proj.weight:clone()
  fp16:clip_grad_norm(model:parameters(), 1.0)
  opt:step()
  opt:zero_grad()
  local moved = (q_proj.weight - before):abs():max():item() > 0
  check.equal(opt.step_was_skipped, step == 2, string.format("fp16 TP 2: step %d skipped on rank %d", step, rank))
  check.equal(moved, step == 1, string.format("fp16 TP 2: q_proj's slice moved at step %d", step))
  check.equal(fp16:loss_scale(), step == 2 and 32768 or 65536, string.format("fp16 TP 2: the scale after step %d", step))
end

-- A bf16 TP 2 run's checkpoint: float32 weights, resumed bit for bit.
local root = os.getenv("ACCEL_TEST_TMPDIR") or "/tmp"
local dir = acc:gather_object(string.format("%s/mesh_mixed_precision_%d_%d", root, os.time(), math.random(1e9)))[1]
local a = mc.setup{ tp = 2, mixed_precision = "bf16" }
local at_save
local losses = mc.train(a, mc.STEPS, { [5] = function()
  a.acc:save_state(dir)
  at_save = a.acc:get_state_dict(a.model)
end })
for name, t in pairs(ck.load_weights(dir)) do check.equal(t.dtype, "float32", "bf16 checkpoint: " .. name) end
local b = mc.setup{ tp = 2, seed = 9, mixed_precision = "bf16" }
b.acc:load_state(dir)
mc.same_state(check, b.acc:get_state_dict(b.model), at_save, 0, "bf16 checkpoint: the weights loaded")
local rest = mc.train(b, mc.STEPS)
for i = 1, 5 do check.near(rest[i], losses[5 + i], 1e-7, string.format("bf16 checkpoint: resumed loss %d", 5 + i)) end
mc.same_state(check, b.acc:get_state_dict(b.model), a.acc:get_state_dict(a.model), 1e-7,
              "bf16 checkpoint: the resumed run's weights")
acc:wait_for_everyone()
if rank == 0 then ck.remove_folder(dir) end

check.done("test_mesh_mixed_precision_2ranks")
