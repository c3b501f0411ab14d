-- A model's {name, tensor} pairs, parameters then buffers, each in
-- definition order: the order save_model and save_pretrained write them.
return function(model)
  local out = {}
  for name, p in model:named_parameters() do out[#out + 1] = { name, p } end
  for name, b in model:named_buffers() do out[#out + 1] = { name, b } end
  return out
end
