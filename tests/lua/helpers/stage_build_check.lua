-- What the tests of a pipeline built by stages share
-- (test_pipeline_stage_build_2ranks, test_pipeline_stage_build_4ranks): a
-- small Llama's checkpoint written by the main process, the recipe's
-- acc:build_model of it, and the check that a rank holds its stages alone.
local pipeline_check = dofile(arg[0]:match("(.*/)") .. "helpers/pipeline_check.lua")

local stage_build_check = {}

-- A folder holding save_pretrained of pipeline_check.tiny(overrides)
-- (seed 1, the reference's weights), written by the main process of
-- `state` (an accel.PartialState), the same name on every rank;
-- max_shard_size (or nil: one file) splits it into shards and an index.
function stage_build_check.checkpoint(state, overrides, max_shard_size)
  local name = os.tmpname()  -- a file made to reserve the name; the folder goes beside it
  os.remove(name)
  local folder = state:gather_object(name .. "-stage-build")[1]
  if state.is_main_process then
    pipeline_check.tiny(overrides):save_pretrained(folder, { max_shard_size = max_shard_size })
  end
  state:wait_for_everyone()
  return folder
end

-- pipeline_check's build option: the pretrained model of `folder`, built
-- by the Accelerator's build_model (or, given no acc, loaded whole as
-- usual), in train mode.
function stage_build_check.from(folder)
  return function(acc)
    local function load() return accel.models.from_pretrained(folder):train() end
    if acc then return acc:build_model(load) end
    return load()
  end
end

-- Every parameter of `whole` (the model built) that the pipelined model's
-- stages hold has memory, and every other one is still on the meta
-- device; each kind exists.
function stage_build_check.holds_stages_only(check, whole, model, what)
  local held, counts = {}, { [true] = 0, [false] = 0 }
  for _, p in ipairs(model:parameters()) do held[p] = true end
  for name, p in whole:named_parameters() do
    local mine = held[p] == true
    counts[mine] = counts[mine] + 1
    check.equal(p.device == "meta", not mine, string.format("%s: %s is %s", what, name,
                                                            mine and "this rank's, with memory" or "left on meta"))
  end
  check.truthy(counts[true] > 0 and counts[false] > 0,
               string.format("%s: %d parameters held, %d left on meta", what, counts[true], counts[false]))
end

return stage_build_check
