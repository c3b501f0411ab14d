-- A pipeline's stages run by a schedule (schedules.lua) over the pp group:
-- each rank holds only its stages' modules and runs its list of actions in
-- order, passing activations forward and their gradients back with the
-- group's point-to-point transfers (ProcessGroup:isend / irecv,
-- engine/comm/tensor_exchange.h). torch.distributed.pipelining's
-- PipelineStage and Schedule*.step, in one object:
--   local stage_runtime = require("accel.parallel.pipeline.stage_runtime")
--   local schedule = schedules.build("1F1B", { pp = 2, microbatches = 4 })
--   local stages = stage_runtime.build_stages{ layer_names = names, build = make_layer,
--                                              schedule = schedule, pp_rank = mesh.pp.rank }
--   local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages,
--                                   loss_fn = function(output, target) return F.mse_loss(output, target) end }
--   local loss = pipe:step(x, y)   -- forward and backward of every micro-batch; gradients in .grad
--
-- Decisions:
-- - Every pp rank is given the whole batch (the pp ranks of a mesh see the
--   same batches); stage 1 cuts its input into `microbatches` equal slices
--   along dim 1, the last stage cuts the targets alike, other stages read
--   neither. A batch that does not divide is refused naming both numbers,
--   by every rank before any transfer (so no peer is left waiting).
-- - The loss is one process's: loss_fn returns a micro-batch's mean, each
--   micro-batch's backward runs on loss / microbatches, so the gradients
--   are the whole batch's mean's (equal slices), and step returns the mean
--   of the micro-batches' losses on every pp rank (broadcast from the last
--   stage's rank).
-- - Between stages travels one tensor: a stage's input arrives detached
--   (a leaf that requires grad), so its backward ends at the boundary and
--   the input's gradient is what goes back; two stages on one rank (pp = 1
--   or the interleaved schedules' neighbours) pass it locally the same way.
-- - A stage's inputs and gradients arrive on the device of its parameters
--   (the CPU for a stage without any).
-- - The tensors the runtime passes between stages (a stage's input and
--   output, the gradients, what it sends) are its own: it releases each
--   (core.release_tensor) once its backward or transfer is done rather
--   than leave its memory to the collector, so a rank's memory follows its
--   schedule's activations in flight; a stage module must not keep its
--   output for later.
-- - Receives are posted at their RECV action and waited by the F or B
--   that needs them; sends complete in the background, as schedule_check
--   assumes (a send never waits for its receive). A send's tensor is let
--   go as soon as the schedule shows its receiver took it: after the first
--   receive from that rank which the receiver sent after the action that
--   waited for it (release_points, below), so that a rank holds the
--   activations its schedule keeps in flight (1F1B: at most pp - rank
--   micro-batches) rather than every one it sent; the rest are waited at
--   the end of the step. A transfer that fails or outlives the group's
--   timeout raises naming the peer and the group; step adds the action.
-- - Under a schedule with W actions (the zero-bubble one) a stage's B
--   computes its input's gradient alone and W its parameters' later
--   (core.autograd.input_backward, engine/parallel/split_backward.h: the
--   graph and the gradients reaching the parameters' ops kept between them);
--   stage 1, whose input needs no gradient, runs the whole backward at B.
--   What holds the parameters may need them back for W (FSDP, whose units
--   are released between B and W: pipeline_fsdp.lua): new's optional
--   before_weights(stage) runs just before each W's weight gradients.
-- - A forward-only step may keep the last stage's outputs (step's
--   `outputs`, an evaluation's logits): each micro-batch's, through
--   outputs(y), joined along dim 1 and broadcast over the group from the
--   last stage's rank, its shape and dtype first (the other ranks know
--   neither: a vocabulary-parallel head's slice, an autocast dtype), onto
--   each rank's stages' device. Without a target the step computes no
--   loss and returns none.
local core = require("accel.core")
local args = require("accel.util.args")
local stage_cut = require("accel.parallel.pipeline.stage_cut")
local Sequential = require("accel.nn.sequential")

local stage_runtime = {}

local Runtime = {}
Runtime.__index = Runtime

local where = "accel.parallel.pipeline.stage_runtime"

-- options() with every key of `keys` required.
local function required_options(name, given, keys, optional)
  local defaults = {}
  for _, key in ipairs(keys) do defaults[key] = args.NONE end
  for _, key in ipairs(optional or {}) do defaults[key] = args.NONE end
  local o = args.options(name, given, defaults)
  for _, key in ipairs(keys) do
    if o[key] == nil then args.error(string.format("%s: option '%s' is required", name, key)) end
  end
  return o
end

-- The stages pp rank `pp_rank` holds, {[stage] = nn.Sequential of its
-- layers}, each layer made by build(name) only on the rank that holds it
-- (so no rank builds the whole model); layers are cut by stage_cut.split
-- ({layers_per_stage} or {module_names_per_stage} pass through).
function stage_runtime.build_stages(options)
  local o = required_options(where .. ".build_stages", options, { "layer_names", "build", "schedule", "pp_rank" },
                             { "layers_per_stage", "module_names_per_stage" })
  local s = o.schedule
  local cut = stage_cut.split(o.layer_names, { stages = s.stages, layers_per_stage = o.layers_per_stage,
                                               module_names_per_stage = o.module_names_per_stage })
  local stages = {}
  for stage = 1, s.stages do
    if s.placement[stage] == o.pp_rank then
      local seq = Sequential()
      for _, name in ipairs(cut[stage]) do seq:append(o.build(name)) end
      seq.pipeline_layer_names = cut[stage]
      stages[stage] = seq
    end
  end
  return stages
end

-- For each of `rank`'s actions, the sends it lets go once its receive has
-- completed: {[action index] = {send action index, ...}} (above). A send's
-- receiver waits for it at the F or B that needs it (RECV_F of stage s is
-- taken by F s, RECV_B by B s); a receive from that rank of a send it made
-- after that F or B proves the transfer done.
local function release_points(s, rank)
  local position = {}
  for r, actions in ipairs(s.ranks) do
    position[r - 1] = {}
    for i, a in ipairs(actions) do position[r - 1][a.kind .. ":" .. a.stage .. ":" .. a.microbatch] = i end
  end
  local function at(r, kind, stage, mb) return position[r][kind .. ":" .. stage .. ":" .. mb] end
  -- The rank and action index of the send action `i`'s wait receives, or nil.
  local actions = s.ranks[rank + 1]
  local function received_from(a)
    if a.kind == "F" and a.stage > 1 and s.placement[a.stage - 1] ~= rank then
      local from = s.placement[a.stage - 1]
      return from, at(from, "SEND_F", a.stage - 1, a.microbatch)
    elseif a.kind == "B" and a.stage < s.stages and s.placement[a.stage + 1] ~= rank then
      local from = s.placement[a.stage + 1]
      return from, at(from, "SEND_B", a.stage + 1, a.microbatch)
    end
  end
  local releases = {}
  for i, a in ipairs(actions) do
    local to, taken
    if a.kind == "SEND_F" then
      to = s.placement[a.stage + 1]
      taken = at(to, "F", a.stage + 1, a.microbatch)
    elseif a.kind == "SEND_B" then
      to = s.placement[a.stage - 1]
      taken = at(to, "B", a.stage - 1, a.microbatch)
    end
    if to then
      for j = i + 1, #actions do
        local from, sent = received_from(actions[j])
        if from == to and sent and taken and sent > taken then
          releases[j] = releases[j] or {}
          table.insert(releases[j], i)
          break
        end
      end
    end
  end
  return releases
end

function stage_runtime.new(options)
  local o = required_options(where .. ".new", options, { "group", "schedule", "stages", "loss_fn" },
                             { "before_weights" })
  local s = o.schedule
  if o.group:size() ~= s.pp then
    args.error(string.format("%s.new: the schedule is for pp = %d but the group has %d ranks", where, s.pp,
                             o.group:size()))
  end
  local rank = o.group:rank()
  for stage = 1, s.stages do
    local here = s.placement[stage] == rank
    if here ~= (o.stages[stage] ~= nil) then
      args.error(string.format("%s.new: stage %d is on pp rank %d, and this rank (%d) %s", where, stage,
                               s.placement[stage], rank, here and "was not given it" or "was given it"))
    end
  end
  -- Where each stage's inputs and gradients arrive: its parameters' device.
  local devices = {}
  for stage, module in pairs(o.stages) do
    local first = module:parameters()[1]
    devices[stage] = first and first.device or "cpu"
  end
  return setmetatable({ group = o.group, schedule = s, stages = o.stages, loss_fn = o.loss_fn, rank = rank,
                        actions = s.ranks[rank + 1], devices = devices, releases = release_points(s, rank),
                        before_weights = o.before_weights }, Runtime)
end

-- The parameters of every stage this rank holds, in stage order.
function Runtime:parameters()
  local out = {}
  for stage = 1, self.schedule.stages do
    if self.stages[stage] then
      for _, p in ipairs(self.stages[stage]:parameters()) do out[#out + 1] = p end
    end
  end
  return out
end

local function microbatches(t, m, what)
  local rows = t:size(1)
  if rows % m ~= 0 then
    args.error(string.format("%s:step: the %s's %d rows do not cut into pp_microbatches = %d equal micro-batches",
                             where, what, rows, m))
  end
  local size, out = math.floor(rows / m), {}
  for mb = 1, m do out[mb] = t:narrow(1, (mb - 1) * size + 1, size) end
  return out
end

-- One step's state: activations, gradients and transfers by (stage, micro-batch).
local function slot(stage, mb) return stage .. ":" .. mb end

-- The actions a forward-only step runs: the schedule's forwards and their
-- transfers, in the schedule's order (a forward depends on forwards and
-- their transfers only, so the order stays deadlock-free).
local FORWARD_KINDS = { F = true, SEND_F = true, RECV_F = true }

local STEP_OPTIONS = { backward = true, loss_fn = args.NONE, loss_reduction = "mean", scale_loss = args.NONE,
                       autocast = args.NONE, outputs = args.NONE, timings = args.NONE }

-- The dtypes an output may travel in, by the code its header carries.
local DTYPES = { "float32", "float64", "float16", "bfloat16", "int64", "int32", "bool" }
local DTYPE_CODE = {}
for code, dtype in ipairs(DTYPES) do DTYPE_CODE[dtype] = code end
local MAX_DIMS = 8

-- The last stage's kept outputs joined, on every rank of the group: its
-- rank sends a header {dims, dtype code, sizes...} (CPU int64), then the
-- tensor; the others receive both onto `device`.
local function broadcast_outputs(self, kept, device)
  local s = self.schedule
  local root = s.placement[s.stages]
  local header = core.zeros({ MAX_DIMS + 2 }, { dtype = "int64" })
  local joined
  if self.rank == root then
    joined = (#kept == 1 and kept[1] or core.cat(kept, 1)):contiguous()
    local code = DTYPE_CODE[joined.dtype]
    if not code or joined:dim() > MAX_DIMS then
      args.error(string.format("%s:step: the last stage's output (%s %s) cannot be kept: outputs travel as %s of at "
                               .. "most %d dims", where, joined.dtype, args.shape(joined), table.concat(DTYPES, ", "),
                               MAX_DIMS))
    end
    local values = { joined:dim(), code }
    for _, n in ipairs(joined:size()) do values[#values + 1] = n end
    for i = #values + 1, MAX_DIMS + 2 do values[i] = 0 end
    header = core.tensor(values, { dtype = "int64" })
  end
  self.group:broadcast(header, root)
  if self.rank ~= root then
    local values = header:totable()
    local sizes = {}
    for i = 1, values[1] do sizes[i] = values[i + 2] end
    joined = core.zeros(sizes, { dtype = DTYPES[values[2]], device = device })
  end
  self.group:broadcast(joined, root)
  return joined
end

-- Runs the schedule on `input` (read by stage 1) and `target` (read by the
-- last stage); returns the batch's loss, a 0-dim float32 tensor, on every
-- rank of the group. options (all optional):
--   backward = false   only the forwards (no gradients, under no_grad): an evaluation
--   loss_fn            this step's, in place of new's
--   loss_reduction     "mean": loss_fn gives a micro-batch's mean, each backward
--                      runs on it / microbatches and the step returns the mean;
--                      "sum": loss_fn gives the micro-batch's share of the
--                      batch's loss (its sum over the batch's count), the
--                      backward runs on it and the step returns the sum
--   scale_loss(l)      what each micro-batch's backward runs on instead of l
--                      (the Accelerator's accumulation and fp16 scaling)
--   autocast(fn)       runs each stage's forward and the loss (mixed precision)
--   outputs(y)         forward-only steps: what to keep of each micro-batch's
--                      last-stage output y (y itself, its last position); the
--                      step then returns loss, the kept outputs joined along
--                      dim 1 on every rank; the target may then be nil (no loss)
--   timings = {}       filled with the seconds each of this rank's F, B and W
--                      actions computed, by action index: from when what it
--                      waits for (a receive) arrived to its end, so that a
--                      bench can weigh the schedule against its actions' times
function Runtime:step(input, target, options)
  local o = args.options(where .. ":step", options, STEP_OPTIONS)
  if o.outputs ~= nil and (o.backward or type(o.outputs) ~= "function") then
    args.error(string.format("%s:step: outputs must be a function, in a forward-only step (backward = false), got "
                             .. "a %s with backward = %s", where, type(o.outputs), tostring(o.backward)))
  end
  if o.loss_reduction ~= "mean" and o.loss_reduction ~= "sum" then
    args.error(string.format("%s:step: loss_reduction must be \"mean\" or \"sum\", got %s", where,
                             tostring(o.loss_reduction)))
  end
  if not o.backward then
    return core.no_grad(function() return self:_run(input, target, o) end)
  end
  return self:_run(input, target, o)
end

function Runtime:_run(input, target, o)
  local s, m = self.schedule, self.schedule.microbatches
  local last = s.stages
  local loss_fn = o.loss_fn or self.loss_fn
  local share = o.loss_reduction == "sum"
  local autocast = o.autocast or function(fn) return fn() end
  -- Cut on every rank given them, so that a batch that does not divide is
  -- refused by all pp ranks alike (not by stage 1 alone, its peers left
  -- waiting for its activations).
  local inputs = input ~= nil and microbatches(input, m, "input")
  local targets = target ~= nil and microbatches(target, m, "target")
  if self.stages[1] and not inputs then args.error(where .. ":step: stage 1 is on this rank and needs the input") end
  if self.stages[last] and not targets and not o.outputs then
    args.error(where .. ":step: the last stage is on this rank and needs the target")
  end
  local st = { input = {}, output = {}, loss = {}, grad_in = {}, grad_out = {}, recv = {}, sends = {}, weights = {} }
  local losses, kept = {}, {}
  local step = self
  local function run(index, a)
    local k, stage, mb = a.kind, a.stage, a.microbatch
    if k == "RECV_F" then
      st.recv[slot(stage, mb)] = step.group:irecv(nil, s.placement[stage - 1], step.devices[stage])
    elseif k == "RECV_B" then
      st.recv[slot(stage, mb)] = step.group:irecv(nil, s.placement[stage + 1], step.devices[stage])
    elseif k == "F" then
      local x
      if stage == 1 then
        x = inputs[mb]
      else
        local arrived = st.recv[slot(stage, mb)]
        if arrived then
          st.recv[slot(stage, mb)] = nil
          x = arrived:wait()
        else
          x = st.output[slot(stage - 1, mb)]:detach()
          if not o.backward then st.output[slot(stage - 1, mb)] = nil end
        end
        if o.backward then x:requires_grad_() end
      end
      if o.backward then st.input[slot(stage, mb)] = x end
      local started = o.timings and core.time()
      local y, loss = autocast(function()
        local out = step.stages[stage](x)
        if stage == last and targets then return out, loss_fn(out, targets[mb]) end
        return out
      end)
      if stage == last then
        if o.outputs then kept[mb] = o.outputs(y) end
        if loss then losses[mb] = loss:detach() end
        if o.backward then st.loss[slot(stage, mb)] = loss end
      else
        st.output[slot(stage, mb)] = y
      end
      if started then o.timings[index] = core.time() - started end
    elseif k == "SEND_F" then
      local sent = st.output[slot(stage, mb)]:detach()
      st.sends[index] = step.group:isend(sent, s.placement[stage + 1])
      core.release_tensor(sent)  -- the transfer holds it until it is done
      if not o.backward then
        core.release_tensor(st.output[slot(stage, mb)])
        st.output[slot(stage, mb)] = nil
      end
    elseif k == "B" then
      local key = slot(stage, mb)
      local y, grad
      if stage == last then
        y = st.loss[key]
        if not share then y = y / m end
        if o.scale_loss then y = o.scale_loss(y) end
        st.loss[key] = nil
      else
        local arrived = st.recv[key]
        if arrived then
          st.recv[key] = nil
          grad = arrived:wait()
        else
          grad = st.grad_in[slot(stage + 1, mb)]
          st.grad_in[slot(stage + 1, mb)] = nil
        end
        y = st.output[key]
        st.output[key] = nil
      end
      local x = st.input[key]
      st.input[key] = nil
      local started = o.timings and core.time()
      -- Split (W actions follow): the input's gradient alone now, the
      -- parameters' at this stage's W (engine/parallel/split_backward.h).
      -- Stage 1's input needs none: its B is the whole backward, its W nothing.
      if s.split_backward and stage > 1 then
        st.weights[key] = core.autograd.input_backward(y, grad, x, step.stages[stage]:parameters())
      else
        y:backward(grad)
      end
      if started then o.timings[index] = core.time() - started end
      if stage < last then  -- the last stage's is the loss, which the step still reads
        core.release_tensor(y)
        core.release_tensor(grad)
      end
      if stage > 1 then
        st.grad_in[key] = x.grad
        core.release_tensor(x)
      end
    elseif k == "W" then
      local key = slot(stage, mb)
      local split = st.weights[key]
      st.weights[key] = nil
      if split then
        if step.before_weights then step.before_weights(stage) end
        local started = o.timings and core.time()
        split:weight_backward()
        if started then o.timings[index] = core.time() - started end
      end
    elseif k == "SEND_B" then
      local key = slot(stage, mb)
      st.sends[index] = step.group:isend(st.grad_in[key], s.placement[stage - 1])
      core.release_tensor(st.grad_in[key])
      st.grad_in[key] = nil
    else
      args.error(string.format("%s:step: action %d: %s actions are not run", where, index, k))
    end
  end
  for index, a in ipairs(self.actions) do
    local ok, err, ran = true, nil, o.backward or FORWARD_KINDS[a.kind]
    if ran then ok, err = pcall(run, index, a) end
    if not ok then
      error(string.format("%s: pp rank %d, action %d (%s stage %d micro-batch %d): %s", where, self.rank, index,
                          a.kind, a.stage, a.microbatch, tostring(err)), 0)
    end
    for _, sent in ipairs(ran and self.releases[index] or {}) do
      if st.sends[sent] then
        core.release_tensor(st.sends[sent]:wait())
        st.sends[sent] = nil
      end
    end
  end
  for _, w in pairs(st.sends) do core.release_tensor(w:wait()) end
  local loss
  if target ~= nil then
    loss = core.tensor(0, { dtype = "float32" })
    if self.stages[last] then
      local sum = losses[1]:to("float32")
      for mb = 2, m do sum = sum + losses[mb]:to("float32") end
      loss = share and sum or sum / m
    end
    self.group:broadcast(loss, s.placement[last])
  end
  if not o.outputs then return loss end
  local _, held = next(self.devices)
  return loss, broadcast_outputs(self, kept, held)
end

return stage_runtime
