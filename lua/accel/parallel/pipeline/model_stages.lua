-- The pretrained architectures a pipeline cuts into stages, by model_type:
-- each one's cut, a module of of(model, options) (the pieces
-- stage_runtime.build_stages and the PipelinedModel take) and
-- module(model, layer name) (the model's module behind a layer): the Llama
-- family's decoder (decoder_stages.lua), Mixtral's (mixtral_stages.lua)
-- and GPT-2's (gpt2_stages.lua).
local decoder_stages = require("accel.parallel.pipeline.decoder_stages")
local mixtral_stages = require("accel.parallel.pipeline.mixtral_stages")
local gpt2_stages = require("accel.parallel.pipeline.gpt2_stages")
local sorted_keys = require("accel.util.sorted_keys")

local model_stages = {}

local CUTS = { llama = decoder_stages, mistral = decoder_stages, qwen2 = decoder_stages, mixtral = mixtral_stages,
               gpt2 = gpt2_stages }

-- The model_type of `model` (an accel.models model), or nil.
function model_stages.model_type(model)
  return type(model) == "table" and model.config and model.config.model_type or nil
end

-- The cut of `model`'s architecture, or nil when none cuts it.
function model_stages.cut(model)
  return CUTS[model_stages.model_type(model)]
end

-- The model_types cut, for messages: "gpt2, llama, mistral, mixtral, qwen2".
function model_stages.known()
  return table.concat(sorted_keys(CUTS), ", ")
end

return model_stages
