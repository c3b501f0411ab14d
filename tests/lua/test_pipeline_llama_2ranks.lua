-- nproc: 2
-- A tiny Llama through the pipeline's stage runtime at PP 2
-- (accel.parallel.pipeline.decoder_stages: embeddings, decoder layers, norm
-- and head as layers, hidden states between stages), GPipe and 1F1B with 4
-- micro-batches: the first step's gradients and 10 AdamW steps' losses and
-- weights equal one process's model{input_ids, labels} within 1e-5
-- (float32), and tied embeddings are refused.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local each_pair = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua").each_pair
local schedules = require("accel.parallel.pipeline.schedules")
local stage_runtime = require("accel.parallel.pipeline.stage_runtime")
local decoder_stages = require("accel.parallel.pipeline.decoder_stages")

local TINY = { model_type = "llama", vocab_size = 32, hidden_size = 16, intermediate_size = 32,
               num_hidden_layers = 2, num_attention_heads = 4, num_key_value_heads = 2 }
local function tiny(overrides)
  local cfg = {}
  for k, v in pairs(TINY) do cfg[k] = v end
  for k, v in pairs(overrides or {}) do cfg[k] = v end
  accel.set_seed(1)
  return accel.models.from_config(cfg):train()
end

local function ids(step)
  accel.set_seed(100 + step)
  return accel.randint(0, 32, { 4, 8 })
end


local mesh = accel.parallel.DeviceMesh.new(accel.ParallelismConfig{ pp_size = 2, pp_microbatches = 4 })
for _, name in ipairs({ "GPipe", "1F1B" }) do
  local schedule = schedules.build(name, { pp = 2, microbatches = 4 })
  local model, reference = tiny(), tiny()
  local pieces = decoder_stages.of(model)
  check.equal(table.concat(pieces.layer_names, ","), "embed_tokens,layers.0,layers.1,norm,lm_head", "layer names")
  local stages = stage_runtime.build_stages{ layer_names = pieces.layer_names, build = pieces.build,
                                             schedule = schedule, pp_rank = mesh.pp.rank }
  local pipe = stage_runtime.new{ group = mesh.pp.group, schedule = schedule, stages = stages,
                                  loss_fn = pieces.loss_fn }
  local opt = accel.optim.AdamW(pipe:parameters(), { lr = 1e-2 })
  local ref_opt = accel.optim.AdamW(reference:parameters(), { lr = 1e-2 })
  local function compare(what, field)
    for stage, seq in pairs(stages) do
      for _, layer in ipairs(seq.pipeline_layer_names) do
        each_pair(decoder_stages.module(model, layer), decoder_stages.module(reference, layer), function(p, mine, ref)
          local a, b = mine, ref
          if field then a, b = mine[field], ref[field] end
          check.near(a, b, 1e-5, string.format("%s: %s stage %d %s.%s", name, what, stage, layer, p))
        end)
      end
    end
  end
  for step = 1, 10 do
    local x = ids(step)
    local loss = pipe:step(x, x)
    local ref_loss = reference{ input_ids = x, labels = x }.loss
    ref_loss:backward()
    check.near(loss, ref_loss:item(), 1e-5, string.format("%s: step %d's loss on pp rank %d", name, step,
                                                          mesh.pp.rank))
    if step == 1 then compare("the first step's gradient of", "grad") end
    opt:step(); opt:zero_grad()
    ref_opt:step(); ref_opt:zero_grad()
  end
  compare("after 10 steps,")
end
check.raises(function() decoder_stages.of(tiny{ tie_word_embeddings = true }) end, "tied",
             "tie_word_embeddings puts the embeddings on the first and last stages")
check.done("pipeline llama")
