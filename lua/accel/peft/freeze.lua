-- Freezes a module tree's parameters the way accel freezes a weight (as
-- nn.Embedding.from_pretrained does): requires_grad false and kept as a
-- buffer, so it stays in state_dict (under the same name, in the same
-- place) but leaves parameters(). That one rule is what makes frozen
-- weights cost nothing in training: an optimizer made from
-- model:parameters() holds no state for them, acc:prepare's gradient
-- reducer and ZeRO/FSDP shards are built from parameters() (broadcast once
-- as buffers, never sharded), and autograd keeps no .grad for them.
--   freeze(root, keep, frozen)
-- keep(module, key) -> true leaves that parameter trainable. Each frozen
-- {module, key} is appended to the list `frozen`, so that PEFT's "all
-- params" can still count them (print_trainable_parameters).
local is_tensor = require("accel.core").is_tensor

return function(root, keep, frozen)
  local done = {}  -- a tensor shared by several modules (tied weights) is frozen in each
  for _, m in ipairs(root:modules()) do
    for _, key in ipairs(m._fields) do
      local v = rawget(m, key)
      if is_tensor(v) and not m._buffers[key] and (done[v] or (v.requires_grad and v.is_leaf))
         and not keep(m, key) then
        if not done[v] then
          v:requires_grad_(false)
          done[v] = true
        end
        m._buffers[key] = true
        frozen[#frozen + 1] = { m, key }
      end
    end
  end
end
