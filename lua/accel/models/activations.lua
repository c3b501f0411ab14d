-- transformers' ACT2FN, by the names configs give (hidden_act in Llama's
-- and BERT's, activation_function in GPT-2's). gelu_new and gelu_fast are
-- the tanh approximation transformers writes out in Python.
local F = require("accel.core").functional
local args = require("accel.util.args")
local config = require("accel.models.config")

local activations = {}

local function tanh_gelu(x) return F.gelu(x, { approximate = "tanh" }) end
local by_name = {
  gelu = F.gelu,
  gelu_new = tanh_gelu,
  gelu_fast = tanh_gelu,
  gelu_pytorch_tanh = tanh_gelu,
  quick_gelu = function(x) return x * F.sigmoid(x * 1.702) end,
  relu = F.relu,
  silu = F.silu,
  swish = F.silu,
  tanh = F.tanh,
}

-- The activation cfg[key] names (`default` when absent); an unknown name is
-- an error naming the file, the key and the names supported.
function activations.of(cfg, key, default)
  local name = config.get(cfg, key, "string", default)
  local fn = by_name[name]
  if not fn then
    local known = {}
    for k in pairs(by_name) do known[#known + 1] = k end
    table.sort(known)
    args.error(string.format("%s: %s '%s' is not supported (supported: %s)", config.source(cfg), key, name,
                             table.concat(known, ", ")))
  end
  return fn
end

return activations
