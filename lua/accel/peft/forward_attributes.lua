-- PEFT's wrappers answer for what they wrap, as PEFT's __getattr__ does:
-- peft_model.config is the model's config, peft_model:gradient_checkpointing_enable()
-- runs on the model, a LoRA layer's .weight is its base layer's, a
-- modules_to_save wrapper's .weight the active copy's. A key the wrapper's
-- class has (forward, state_dict, ...) stays the wrapper's own.
--   forward_attributes(cls, function(self) return the wrapped module end)
-- A function found on the wrapped module is handed back bound to it when
-- called as a method of the wrapper (wrapper:method(...) runs
-- wrapped:method(...)).
return function(cls, wrapped)
  cls.__index = function(self, key)
    local own = cls[key]
    if own ~= nil then return own end
    local target = wrapped(self)
    if target == nil then return nil end
    local value = target[key]
    if type(value) ~= "function" then return value end
    return function(first, ...)
      if first == self then return value(target, ...) end
      return value(first, ...)
    end
  end
end
