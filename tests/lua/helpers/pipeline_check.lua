-- What the pipeline tests share (test_pipeline_runtime, test_pipeline_llama_2ranks).
local pipeline_check = {}

-- fn(name, p, ref_p) for each parameter of `mine` beside the same-named one
-- of `theirs` (a module built alike).
function pipeline_check.each_pair(mine, theirs, fn)
  local ref = {}
  for name, p in theirs:named_parameters() do ref[name] = p end
  for name, p in mine:named_parameters() do fn(name, p, ref[name]) end
end

return pipeline_check
