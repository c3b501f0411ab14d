-- Loads a pretrained folder, reports a weight's sum and how many kept
-- tensors the warm worker handed out so far, then changes that weight in
-- place (as a training step would) and generates. Usage: -- FOLDER
local folder = arg[1]
local model = accel.models.from_pretrained(folder)
local w = model.model.layers[1].mlp.up_proj.weight
local kept = require("accel.core").formats.kept_weights()
print(string.format("RANK %s SUM %.9g FOUND %d KEPT %d", os.getenv("RANK"), w:sum():item(), kept.found, kept.kept))
accel.no_grad(function() w:add_(1) end)
local out = model:generate(accel.LongTensor({ { 1, 2, 3 } }), { max_new_tokens = 2 })
print(string.format("RANK %s TOKENS %d", os.getenv("RANK"), out:size(2)))
