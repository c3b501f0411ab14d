-- Accelerator:train_step(fn): one training step as a function, which
-- Accelerator{cuda_graphs = true} captures as a CUDA graph after warm-up and
-- replays (engine/cuda_graph.h); without cuda_graphs it is fn itself.
--   local step = acc:train_step(function(x, y)
--     local loss = F.cross_entropy(model(x), y)
--     acc:backward(loss)
--     acc:clip_grad_norm(model:parameters(), 1.0)
--     opt:step(); sched:step(); opt:zero_grad()
--     return loss
--   end)
--   for x, y in loader:iter() do print(step(x, y):item()) end
--
-- The first `warmup` calls (3, or cuda_graphs = {warmup = n}) run eagerly
-- on the graph's side stream, so that every lazily made thing (optimizer
-- state, library workspaces) exists before the capture. The next call is
-- captured with copies of its tensor arguments as the graph's static
-- inputs, then replayed; every later call copies its tensors into those
-- inputs and replays. fn's tensor results are the graph's outputs: valid
-- until the next call (clone one to keep it); other results are those of
-- the captured call.
--
-- Host bookkeeping that fn does is recorded during the capture instead of
-- done, and done after every replay: the prepared optimizers' update counts,
-- the prepared schedulers' steps (the learning rate reaches the fused
-- kernels through a device tensor refreshed before each replay), the
-- gradient state's synchronisation count. Adam and AdamW step with their
-- fused kernels under cuda_graphs (an eager run with fused = true computes
-- the same values).
--
-- What cannot be captured runs eagerly, said once in one line: a setup the
-- graph cannot serve (no GPU, several processes, gradient accumulation,
-- fp16's loss scaler, sharding, an optimizer other than Adam/AdamW) from the
-- first call on; a failed capture (a host read such as loss:item() inside
-- fn) from then on; a call whose tensors differ in shape, dtype or device
-- from the captured ones, that call.
local core = require("accel.core")
local args = require("accel.util.args")
local tensor_tree = require("accel.util.tensor_tree")

local CapturedStep = {}
CapturedStep.__index = CapturedStep

local function pack(...)
  return { n = select("#", ...), ... }
end

-- Why this Accelerator's steps cannot be captured, or nil.
local function unsupported(acc)
  if acc.device:sub(1, 4) ~= "cuda" then return "the Accelerator computes on the CPU" end
  if acc.num_processes > 1 then
    return string.format("gradients are synchronised over %d processes, whose waits are on the host", acc.num_processes)
  end
  if acc.gradient_accumulation_steps > 1 then
    return "gradient accumulation alternates steps with and without synchronisation"
  end
  if acc.mixed_precision == "fp16" then return "fp16's loss scaler reads the overflow flag on the host" end
  local refusal = acc._parallel:capture_refusal()
  if refusal then return refusal end
  for _, opt in ipairs(acc._optimizers) do
    local name = opt.optimizer:name()
    if name ~= "Adam" and name ~= "AdamW" then
      return name .. " reads its hyper-parameters on the host (graphs capture Adam and AdamW, fused)"
    end
  end
  return nil
end

-- What a call's tensors are: shapes, dtypes and devices in argument order.
local function signature(call)
  local parts = {}
  tensor_tree.each(call, function(t)
    parts[#parts + 1] = string.format("%s%s on %s", t.dtype, args.shape(t), tostring(t.device))
  end)
  return table.concat(parts, ", ")
end

function CapturedStep:_say(message)
  if self.said[message] then return end
  self.said[message] = true
  self.acc:print("cuda_graphs: " .. message)
end

function CapturedStep:_eager(call)
  return self.fn(unpack(call, 1, call.n))
end

function CapturedStep:_warm_up(call)
  if self.calls == 0 then
    local why = unsupported(self.acc)
    if why then
      self.eager_reason = why
      self:_say(why .. "; steps run eagerly")
      return self:_eager(call)
    end
    for _, opt in ipairs(self.acc._optimizers) do opt.optimizer:set_implementation("fused") end
    self.graph = core.graphs.new()
  end
  self.calls = self.calls + 1
  self.graph:enter_side_stream()
  local results = { n = 0 }
  local ok, err = pcall(function() results = pack(self:_eager(call)) end)
  self.graph:leave_side_stream()
  if not ok then error(err, 0) end
  return unpack(results, 1, results.n)
end

local function gradients_of(acc)
  local held = {}
  for _, entry in ipairs(acc._models) do
    for _, p in ipairs(entry.model:parameters()) do held[#held + 1] = { p, p.grad } end
  end
  return held
end

function CapturedStep:_refresh()
  for _, opt in ipairs(self.acc._optimizers) do opt.optimizer:refresh_device_options() end
end

function CapturedStep:_host_actions()
  for _, action in ipairs(self.actions) do action() end
end

-- Captures fn on copies of this call's tensors, then replays the capture
-- for this call. A failed capture leaves no trace on the host's state
-- (bookkeeping was only recorded, gradients are put back) and this call
-- runs eagerly.
function CapturedStep:_capture(call)
  local acc = self.acc
  self.inputs = tensor_tree.map(call, function(t) return t:clone() end)
  self.signature = signature(call)
  local before = gradients_of(acc)
  self.actions = {}
  acc.gradient_state._capture = self.actions
  self:_refresh()
  self.graph:enter_side_stream()
  local results
  local ok, err = pcall(function()
    self.graph:capture_begin()
    results = pack(self.fn(unpack(self.inputs, 1, self.inputs.n)))
    self.graph:capture_end()
  end)
  if not ok then self.graph:abandon_capture() end
  self.graph:leave_side_stream()
  acc.gradient_state._capture = nil
  if not ok then
    for _, held in ipairs(before) do held[1].grad = held[2] end
    self.eager_reason = tostring(err)
    self:_say("the step could not be captured (" .. tostring(err):gsub("\n.*", "") .. "); steps run eagerly")
    return self:_eager(call)
  end
  self.outputs = results
  self.graph:replay()
  self:_host_actions()
  return unpack(results, 1, results.n)
end

function CapturedStep:__call(...)
  local call = pack(...)
  if self.eager_reason then return self:_eager(call) end
  if self.calls < self.warmup then return self:_warm_up(call) end
  if not self.graph:captured() then return self:_capture(call) end
  local shape = signature(call)
  if shape ~= self.signature then
    self:_say("a step whose tensors are " .. shape .. " (captured: " .. self.signature .. ") runs eagerly")
    return self:_eager(call)
  end
  local inputs = {}
  tensor_tree.each(self.inputs, function(t) inputs[#inputs + 1] = t end)
  local i = 0
  tensor_tree.each(call, function(t)
    i = i + 1
    inputs[i]:copy_(t)
  end)
  self:_refresh()
  self.graph:replay()
  self:_host_actions()
  return unpack(self.outputs, 1, self.outputs.n)
end

-- cuda_graphs = true or {warmup = n}: the Accelerator option, checked.
local function settings(value)
  if value == false or value == nil then return nil end
  if value == true then return { warmup = 3 } end
  local o = args.options("accel.Accelerator: cuda_graphs", value, { warmup = 3 }, { warmup = "number" })
  args.positive_integer("accel.Accelerator: cuda_graphs", "warmup", o.warmup)
  return o
end

return function(Accelerator)
  Accelerator._cuda_graph_settings = settings

  function Accelerator:train_step(fn)
    if type(fn) ~= "function" then
      args.error("Accelerator:train_step: expected the step as a function, got a " .. type(fn))
    end
    if not self.cuda_graphs then return fn end
    return setmetatable({ acc = self, fn = fn, warmup = self.cuda_graphs.warmup, calls = 0, said = {} },
                        CapturedStep)
  end
end
