-- Cutting a model into pipeline stages by its layers' names
-- (accel.parallel.pipeline.stage_cut): even by default, layers_per_stage,
-- or explicit lists, with the embeddings and the head counted as layers.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local stage_cut = require("accel.parallel.pipeline.stage_cut")

local names = { "embed_tokens" }
for i = 0, 5 do names[#names + 1] = "layers." .. i end
names[#names + 1] = "norm"
names[#names + 1] = "lm_head"  -- 9 layers

local function joined(stages)
  local out = {}
  for s, list in ipairs(stages) do out[s] = table.concat(list, " ") end
  return table.concat(out, " | ")
end

-- Even: 9 layers over 4 stages are 3, 2, 2, 2; over 9 stages one each.
check.equal(joined(stage_cut.split(names, { stages = 4 })),
            "embed_tokens layers.0 layers.1 | layers.2 layers.3 | layers.4 layers.5 | norm lm_head", "even 4")
check.equal(#stage_cut.split(names, { stages = 9 }), 9, "one layer per stage")
check.equal(joined(stage_cut.split(names, {})), table.concat(names, " "), "one stage holds all")
-- layers_per_stage: ceil(9 / 4) = 3 stages of 4, 4, 1.
check.equal(joined(stage_cut.split(names, { stages = 3, layers_per_stage = 4 })),
            "embed_tokens layers.0 layers.1 layers.2 | layers.3 layers.4 layers.5 norm | lm_head", "layers_per_stage")
-- Explicit lists.
local lists = { { "embed_tokens", "layers.0" }, { "layers.1", "layers.2", "layers.3", "layers.4", "layers.5", "norm", "lm_head" } }
check.equal(joined(stage_cut.split(names, { stages = 2, module_names_per_stage = lists })),
            "embed_tokens layers.0 | layers.1 layers.2 layers.3 layers.4 layers.5 norm lm_head", "explicit")

-- Refusals, each naming what is wrong.
check.raises(function() stage_cut.split(names, { stages = 10 }) end, "too many stages",
             "10 stages for a model of 9 layers", "embed_tokens")
check.raises(function() stage_cut.split(names, { stages = 2, layers_per_stage = 4 }) end, "layers_per_stage",
             "layers_per_stage = 4 cuts the model's 9 layers into 3 stages, but the pipeline has 2")
check.raises(function() stage_cut.split(names, { stages = 3, module_names_per_stage = lists }) end, "count",
             "module_names_per_stage must list 3 stages", "got 2")
check.raises(function()
  stage_cut.split(names, { stages = 2, module_names_per_stage = { { "embed_tokens", "layers.9" }, { "lm_head" } } })
end, "unknown name", "stage 1 names \"layers.9\", which is not a layer of the model (9 layers")
check.raises(function()
  stage_cut.split(names, { stages = 2, module_names_per_stage = { { "embed_tokens", "layers.0" }, { "layers.0" } } })
end, "twice", "\"layers.0\" is in stage 1 and again in stage 2")
check.raises(function()
  stage_cut.split(names, { stages = 2, module_names_per_stage = { { "embed_tokens", "layers.1" }, { "layers.0" } } })
end, "order", "stage 1 lists \"layers.1\" where \"layers.0\" comes next")
check.raises(function()
  stage_cut.split(names, { stages = 2, module_names_per_stage = { { "embed_tokens", "layers.0" }, { "layers.1" } } })
end, "left out", "leaves out \"layers.2\" and the 5 layer(s) after it")
check.raises(function()
  stage_cut.split(names, { stages = 2, module_names_per_stage = { names, {} } })
end, "empty", "stage 2 of module_names_per_stage holds no layers")
check.raises(function()
  stage_cut.split(names, { stages = 2, layers_per_stage = 5, module_names_per_stage = lists })
end, "both", "not both")
check.raises(function() stage_cut.split({ "a", "b", "a" }, { stages = 2 }) end, "duplicate layer",
             "lists layer \"a\" twice (1 and 3)")
check.raises(function() stage_cut.split(names, { stage = 2 }) end, "unknown option", "stage")
check.done("pipeline stage cut")
