-- An nn.Sequential as a pipeline's layers, for stage_runtime.build_stages
-- and the Accelerator (pipeline_parallel.lua): its children by position
-- ("1", "2", ..., the names its state_dict uses), each passing one tensor
-- on, and the loss the recipe gives it as model.loss_fn = function(output,
-- labels) ... end (a micro-batch's mean), which the last stage computes
-- (torchtitan's pipeline takes its loss_fn the same way). The pieces are
-- the model's own layers, trained in place.
local args = require("accel.util.args")
local Sequential = require("accel.nn.sequential")

local sequential_stages = {}

local where = "accel.parallel.pipeline.sequential_stages"

-- Whether `model` is an nn.Sequential (or made by a class extending it).
function sequential_stages.is(model)
  local cls = getmetatable(model)
  while cls do
    if cls == Sequential then return true end
    cls = rawget(cls, "super")
  end
  return false
end

-- {layer_names, build, loss_fn, input_key, output_key} of `model` (in
-- evaluation a pipelined Sequential's out.output is the last layer's).
function sequential_stages.of(model)
  if not sequential_stages.is(model) then args.error(where .. ".of: expected an nn.Sequential") end
  local loss_fn = rawget(model, "loss_fn")
  if type(loss_fn) ~= "function" then
    args.error(where .. ".of: an nn.Sequential trained through a pipeline needs its loss, which the last stage "
               .. "computes: set model.loss_fn = function(output, labels) ... end (a micro-batch's mean) before "
               .. "prepare")
  end
  local names = {}
  for i = 1, model.length do names[i] = tostring(i) end
  return { layer_names = names, build = function(name) return model[tonumber(name)] end, loss_fn = loss_fn,
           input_key = "input", output_key = "output" }
end

return sequential_stages
