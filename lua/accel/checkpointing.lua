-- What an Accelerator's checkpoint holds and how ranks write and read it
-- together; the file formats and the atomic folder are the engine's
-- (engine/formats/, bound as accel.core.formats). The contract is in
-- docs/api/checkpointing.md. A checkpoint folder:
--
--   model.safetensors, model_1.safetensors ...  prepared models (main process)
--   optimizer.safetensors, optimizer_1 ...      optimizers' flat state dicts (main)
--   scheduler.lua, scheduler_1.lua ...          schedulers' state dicts (main)
--   scaler.lua                                  the fp16 loss scaler (main)
--   custom_checkpoint_0.lua ...                 registered objects (main)
--   accelerator_state.lua                       step counters (main)
--   rng_<rank>.safetensors                      each rank's generators
--   dataloader_rank_<rank>.lua, dataloader_1_rank_<rank>.lua ...
--                                               each rank's loader positions
--   model_rank_<rank>.safetensors, model_1_rank_<rank> ...
--                                               a sharded model's slices, each rank's
--                                               (SHARDED_STATE_DICT, parallel/checkpoint/flat_shards.lua)
--   optimizer_rank_<rank>.safetensors ...       its optimizer's sharded state, each rank's
--   model_sharding.lua, model_1_sharding.lua    their layout (main)
--   model_experts_rank_<rank>.safetensors, optimizer_experts_rank_<rank> ...
--                                               under expert parallelism, the experts'
--                                               tensors and optimizer state by the whole
--                                               model's names, each by the first rank
--                                               holding it (parallel/checkpoint/expert_checkpoint.lua)
--   gradients_rank_<rank>.safetensors, gradients_1_rank_<rank> ...
--                                               each rank's accumulated gradients,
--                                               when saved between two micro-steps
--                                               of one optimizer update
--   manifest.json                               written last (engine/formats/manifest.h)
--
-- ".lua" files hold one Lua value written by accel.serialize (data only: no
-- Lua code is loaded from them, see accel/serialize.lua).
--
-- Saving and loading take the checkpoint's contents as explicit lists, `c`
-- below (Accelerator:_checkpoint_contents makes it):
--   c.state: the PartialState (process facts, collectives, print)
--   c.project_configuration: where automatic checkpoints go
--   c.gradient_state: step counters, sync_gradients and the fp16 scaler
--   c.models, c.optimizers, c.schedulers, c.dataloaders, c.custom_objects:
--     the prepared and registered objects, in preparation order
--   c.split: how the models are split (a SplitCheckpoint,
--     parallel/checkpoint/split_checkpoint.lua): sharded models (ZeRO /
--     FSDP) and split ones (a device mesh) are written full, as plain data
--     parallel writes them (FULL_STATE_DICT), so any layout loads them, or
--     as each rank's slices with the layouts that cut them
--     (SHARDED_STATE_DICT); parallel/checkpoint/write_split.lua and
--     read_split.lua write and read that part, and its gradient holders
--     and full parameters are asked of it
--
-- The jobs are in checkpointing/: layout.lua (the folder's names and
-- order), agreement.lua (ranks failing together), save.lua and load.lua.
local core = require("accel.core")
local args = require("accel.util.args")
local layout = require("accel.checkpointing.layout")
local load = require("accel.checkpointing.load")

local ck = core.formats

local checkpointing = {
  save_state = require("accel.checkpointing.save").save_state,
  load_state = load.load_state,
}

-- Registered objects ---------------------------------------------------------

-- Appends to `custom_objects` (the Accelerator's list) each argument.
function checkpointing.register(custom_objects, ...)
  for i = 1, select("#", ...) do
    local obj = select(i, ...)
    if type(obj) ~= "table" and type(obj) ~= "userdata" or type(obj.state_dict) ~= "function"
       or type(obj.load_state_dict) ~= "function" then
      args.error(string.format("Accelerator:register_for_checkpointing: argument %d (a %s) has no "
                               .. "state_dict and load_state_dict methods", i, type(obj)))
    end
    custom_objects[#custom_objects + 1] = obj
  end
end

-- Weights for other tools ----------------------------------------------------

-- `state`: the PartialState; its main process writes; `full`: the full
-- weights by name where the model holds slices (under a mesh);
-- `ordered`: the {name, tensor} pairs to write, where the model's own
-- names are not the ones written (a pipeline's stages).
function checkpointing.save_model(state, model, dir, options, full, ordered)
  local o = args.options("Accelerator:save_model", options,
                         { safe_serialization = true, max_shard_size = "2GB" })
  if type(dir) ~= "string" then args.error("Accelerator:save_model: the folder must be a string, got a " .. type(dir)) end
  local files
  if state.is_main_process then
    if not ordered then
      ordered = layout.ordered_state(model)
      if full then
        for _, pair in ipairs(ordered) do pair[2] = full[pair[1]] end
      end
    end
    files = ck.save_weights(dir, ordered, o)
  end
  state:wait_for_everyone()
  return files
end

-- `fit(weights, dir)`, when given, makes what was read fit the model (this
-- tp rank's slices of full weights; errors name `dir`).
function checkpointing.load_model(model, dir, options, fit)
  local o = args.options("Accelerator:load_model", options, { strict = true })
  if type(dir) ~= "string" then args.error("Accelerator:load_model: the folder must be a string, got a " .. type(dir)) end
  local weights = ck.load_weights(dir)
  if fit then
    local ok, fitted = pcall(fit, weights, dir)
    if not ok then args.error("Accelerator:load_model: " .. tostring(fitted)) end
    weights = fitted
  end
  local ok, err = pcall(load.apply, dir, model.load_state_dict, model, weights, o.strict)
  if not ok then args.error("Accelerator:load_model: " .. err) end
end

return checkpointing
