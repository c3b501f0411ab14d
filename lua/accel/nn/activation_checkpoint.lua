-- accel.checkpoint(fn, ...): returns fn(...)'s results, computed without
-- keeping the activations backward needs; backward runs fn again to get
-- them (torch.utils.checkpoint, with use_reentrant=False's semantics:
-- engine/activation_checkpoint.h says how and why). The random state and
-- the autocast state of the call are restored for the recomputation, so
-- gradients equal the uncheckpointed ones, dropout included.
--
-- The tensor arguments are the block's inputs: what it keeps. Other
-- arguments (numbers, tables, modules) are passed as they are, both times.
-- The tensors among the results, directly or in plain tables (walked in
-- sorted key order, so that both runs list them alike), carry the
-- gradients back; plain tables come back as copies, a tensor that needs no
-- gradient as it is. fn must compute the same thing both times. Without
-- grad mode (accel.no_grad, evaluation) it is a plain call.
local core = require("accel.core")
local args = require("accel.util.args")
local sorted_keys = require("accel.util.sorted_keys")

local is_tensor = core.is_tensor
local run_checkpointed = core.autograd.checkpoint

local function is_plain_table(v)
  return type(v) == "table" and getmetatable(v) == nil
end

-- The tensors in `value`, appended to `out` in one order on every call.
local function collect(value, out)
  if is_tensor(value) then
    out[#out + 1] = value
  elseif is_plain_table(value) then
    for _, k in ipairs(sorted_keys(value)) do collect(value[k], out) end
  end
  return out
end

-- `value` with its tensors replaced, in collect's order, by replacements[i]
-- from i = state.next on; one that needs no gradient stays itself.
local function replace(value, replacements, state)
  if is_tensor(value) then
    local t = replacements[state.next]
    state.next = state.next + 1
    return value.requires_grad and t or value
  end
  if not is_plain_table(value) then return value end
  local out = {}
  for _, k in ipairs(sorted_keys(value)) do out[k] = replace(value[k], replacements, state) end
  return out
end

local function pack(...)
  return { n = select("#", ...), ... }
end

local function is_callable(fn)
  if type(fn) == "function" then return true end
  local mt = getmetatable(fn)
  return type(mt) == "table" and mt.__call ~= nil
end

return function(fn, ...)
  if not is_callable(fn) then
    args.error("accel.checkpoint: expected a function (or a callable such as a module) as argument 1, got a "
               .. type(fn))
  end
  if not core.is_grad_enabled() then return fn(...) end
  local n = select("#", ...)
  local call = { ... }
  local inputs, at = {}, {}
  for i = 1, n do
    if is_tensor(call[i]) then
      inputs[#inputs + 1], at[#at + 1] = call[i], i
      call[i] = nil  -- the engine keeps the inputs; this closure keeps the rest
    end
  end
  local first, ran  -- the first run's results, until handed out
  local function run(tensors)
    for k, i in ipairs(at) do call[i] = tensors[k] end
    local results = pack(fn(unpack(call, 1, n)))
    for _, i in ipairs(at) do call[i] = nil end
    if not ran then first, ran = results, true end
    local out = {}
    for i = 1, results.n do collect(results[i], out) end
    return out
  end
  local outputs = run_checkpointed(run, inputs)
  local results, state = first, { next = 1 }
  first = nil
  for i = 1, results.n do results[i] = replace(results[i], outputs, state) end
  return unpack(results, 1, results.n)
end
