-- Whether tensors a and b are one tensor (the same storage, offset, shape
-- and strides: is_set_to), as the checkpoint and pipeline code find a
-- parameter among a model's. A tensor on the meta device (a model built
-- empty, in part: a pipeline's stages) is one only with itself, as the
-- object it is: LibTorch compares no meta storages.
return function(a, b)
  if rawequal(a, b) then return true end
  return a.device == b.device and a.device ~= "meta" and a:is_set_to(b)
end
