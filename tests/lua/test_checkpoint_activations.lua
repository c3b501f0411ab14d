-- accel.checkpoint and model:gradient_checkpointing_enable() on one rank:
-- gradients equal the uncheckpointed ones bit for bit with dropout on (12
-- blocks of the recipe's own with nn.Dropout, and a 12-layer Llama with
-- attention dropout), with autocast, through nested checkpoints and for a
-- block returning several tensors among other values; what backward leaves
-- of the random state; recomputation on another thread (Note [Lua in
-- backward], bindings/lua_in_backward.h); errors in a recomputed block name
-- the block's line; misuse that would give wrong gradients fails instead.
-- LoRA adapters (accel.peft) on a checkpointed Llama.
-- Every gradient synchronisation, at 1 and 2 ranks: test_checkpoint_activations_sync.lua.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional
local core = require("accel.core")

local function line() return debug.getinfo(2, "l").currentline end
-- The line of this file that holds `text` (once).
local function line_of(text)
  local n = 0
  for l in io.lines(arg[0]) do
    n = n + 1
    if l:find(text, 1, true) then return n end
  end
end
local function pack(...) return { n = select("#", ...), ... } end
local function recomputations() return core.autograd.recomputations() end

-- The gradients of `params` (and of x when it requires grad) after
-- loss_of():backward(), dropout drawn from `seed`.
local function gradients(params, loss_of, seed, x)
  for _, p in ipairs(params) do p.grad = nil end
  if x then x.grad = nil end
  accel.set_seed(seed)
  loss_of():backward()
  local out = {}
  for i, p in ipairs(params) do out[i] = p.grad:clone() end
  if x then out[#out + 1] = x.grad:clone() end
  return out
end

local function same(a, b, what)
  check.equal(#a, #b, what .. ": as many gradients")
  for i = 1, #a do check.near(a[i], b[i], 0, what .. ": gradient " .. i) end
end

-- Blocks of the recipe's own, in an nn.ModuleList -----------------------------
local Block = nn.Module:extend("Block")
function Block:init(d)
  self.fc1 = nn.Linear(d, 2 * d)
  self.drop = nn.Dropout(0.3)
  self.fc2 = nn.Linear(2 * d, d)
end
function Block:forward(x)
  return x + self.fc2(self.drop(F.gelu(self.fc1(x))))
end

local Net = nn.Module:extend("Net")
function Net:init(d, depth)
  local blocks = {}
  for i = 1, depth do blocks[i] = Block(d) end
  self.blocks = nn.ModuleList(blocks)
  self.head = nn.Linear(d, 3)
end
function Net:forward(x)
  for _, block in ipairs(self.blocks) do x = block(x) end
  return self.head(x)
end

accel.set_seed(1)
local net = Net(16, 12)
local x = accel.randn(8, 16):requires_grad_()
local y = accel.randint(1, 4, { 8 })
local function net_loss() return F.cross_entropy(net(x), y) end
local params = net:parameters()
local plain = gradients(params, net_loss, 5, x)
check.equal(net:gradient_checkpointing_enable(), net, "gradient_checkpointing_enable returns the model")
check.equal(net.is_gradient_checkpointing, true, "is_gradient_checkpointing")
local before = recomputations().total
same(gradients(params, net_loss, 5, x), plain, "12 checkpointed blocks")
check.equal(recomputations().total - before, 12, "each block recomputed once")
-- Dropout is on: other draws give other gradients.
local other = gradients(params, net_loss, 6, x)
check.truthy((other[1] - plain[1]):abs():max():item() > 0, "dropout changes the gradients")
-- Evaluation and no_grad run the blocks as they are.
before = recomputations().total
net:eval()
gradients(params, net_loss, 5, x)
net:train()
accel.no_grad(function() net(x) end)
check.equal(recomputations().total - before, 0, "nothing recomputed in eval mode or under no_grad")
net:gradient_checkpointing_disable()
check.equal(net.is_gradient_checkpointing, false, "disabled")
same(gradients(params, net_loss, 5, x), plain, "disabled")
check.equal(recomputations().total - before, 0, "nothing recomputed once disabled")
check.raises(function() net:gradient_checkpointing_enable({ use_reentrant = true }) end,
             "an unknown option", "unknown option 'use_reentrant'", "test_checkpoint_activations.lua:" .. line() - 1)
check.raises(function() nn.Linear(2, 2):gradient_checkpointing_enable() end, "a module without blocks",
             "no nn.ModuleList of blocks", "test_checkpoint_activations.lua:" .. line() - 1)

-- What a forward keeps: the blocks' inputs, not their activations.
local function kept_by_forward(model, input)
  collectgarbage("collect")
  local before = accel.cpu_memory_stats().allocated_bytes
  local output = model(input)
  collectgarbage("collect")
  local kept = accel.cpu_memory_stats().allocated_bytes - before
  output = nil
  return kept
end
accel.set_seed(1)
local wide_net, wide_x = Net(64, 12), accel.randn(64, 64):requires_grad_()
local kept_plain = kept_by_forward(wide_net, wide_x)
wide_net:gradient_checkpointing_enable()
local kept_checkpointed = kept_by_forward(wide_net, wide_x)
check.truthy(kept_checkpointed < kept_plain / 4, string.format(
  "a checkpointed forward keeps less than a quarter (%d bytes, against %d)", kept_checkpointed, kept_plain))
-- And steps leave nothing behind: a second step ends where the first did.
local function step() wide_net(wide_x):sum():backward() end
step()
collectgarbage("collect")
local before_step = accel.cpu_memory_stats().allocated_bytes
step()
collectgarbage("collect")
check.equal(accel.cpu_memory_stats().allocated_bytes, before_step, "bytes allocated after a checkpointed step")

-- A 12-layer Llama with attention dropout ----------------------------------------
local llama = accel.models.from_config({
  model_type = "llama", vocab_size = 50, hidden_size = 32, intermediate_size = 64, num_hidden_layers = 12,
  num_attention_heads = 4, num_key_value_heads = 2, attention_dropout = 0.25, max_position_embeddings = 32,
})
local ids = accel.randint(0, 50, { 2, 12 })
local function llama_loss() return llama{ input_ids = ids, labels = ids }.loss end
local llama_params = llama:parameters()
local llama_plain = gradients(llama_params, llama_loss, 9)
llama:gradient_checkpointing_enable()
before = recomputations().total
same(gradients(llama_params, llama_loss, 9), llama_plain, "Llama, per decoder layer")
check.equal(recomputations().total - before, 12, "one recomputation per decoder layer")
check.truthy((gradients(llama_params, llama_loss, 10)[1] - llama_plain[1]):abs():max():item() > 0,
             "attention dropout changes the gradients")
-- Generation runs under no_grad: the layers run as they are, with the cache.
llama:eval()
local generated = llama:generate(ids:narrow(2, 1, 4), { max_new_tokens = 3 })
check.equal(generated:size(2), 7, "generate with gradient checkpointing on")
llama:train()
llama:gradient_checkpointing_disable()
-- With LoRA adapters on a frozen base (accel.peft): the layers' inputs need
-- no gradient, their adapters do, and their dropout draws too.
local peft = accel.peft.get_peft_model(llama, accel.peft.LoraConfig{
  r = 4, lora_alpha = 8, lora_dropout = 0.1, target_modules = { "q_proj", "v_proj", "down_proj" } })
local function peft_loss() return peft{ input_ids = ids, labels = ids }.loss end
local adapters = peft:parameters()
check.equal(#adapters, 12 * 3 * 2, "the adapters are the parameters")
local peft_plain = gradients(adapters, peft_loss, 9)
peft:gradient_checkpointing_enable()
same(gradients(adapters, peft_loss, 9), peft_plain, "LoRA adapters on a frozen Llama")

-- Several results, tensors among other values; arguments of every kind --------
local w = accel.randn(4, 4):requires_grad_()
local scale = w:sum() * 0.1  -- needs a gradient, reaches the block as a table's field
local labels = accel.LongTensor({ 1, 2 })
local function several(a, settings, k, label)
  local h = accel.matmul(a, w):tanh()
  return h, label .. "!", k * 2, { second = h * settings.scale, ids = labels, n = 2 }, nil, labels
end
local a = accel.randn(2, 4):requires_grad_()
local direct = { several(a, { scale = scale }, 3, "x") }
local results = pack(accel.checkpoint(several, a, { scale = scale }, 3, "x"))
check.equal(results.n, 6, "every result comes back, a nil among them")
check.equal(results[2], "x!", "a string result")
check.equal(results[3], 6, "a number result")
check.equal(results[5], nil, "a nil result")
check.equal(results[6], labels, "a tensor that needs no gradient comes back as it is")
check.equal(results[4].ids, labels, "inside a table too")
check.equal(results[4].n, 2, "a table's other values")
check.near(results[1], direct[1], 0, "the first tensor's values")
check.near(results[4].second, direct[4].second, 0, "a tensor inside a table")
-- Each backward frees the graph that made scale: each loss makes it anew.
local function two_outputs(r) return r[1]:sum() + (r[4].second * 3):sum() end
local expected = gradients({ w, a }, function()
  return two_outputs({ several(a, { scale = w:sum() * 0.1 }, 3, "x") })
end, 1)
local got = gradients({ w, a }, function()
  return two_outputs({ accel.checkpoint(several, a, { scale = w:sum() * 0.1 }, 3, "x") })
end, 1)
for i = 1, 2 do check.near(got[i], expected[i], 1e-6, "gradients through both tensor results " .. i) end

-- Nested checkpoints ------------------------------------------------------------------
accel.set_seed(2)
local inner = Net(8, 4)
local xi = accel.randn(4, 8):requires_grad_()
local function nested_forward(checkpointed)
  local function pair(h, from)
    for i = from, from + 1 do
      local block = inner.blocks[i]
      h = checkpointed and accel.checkpoint(block, h) or block(h)
    end
    return h
  end
  local h = checkpointed and accel.checkpoint(pair, xi, 1) or pair(xi, 1)
  h = checkpointed and accel.checkpoint(pair, h, 3) or pair(h, 3)
  return inner.head(h):pow(2):mean()
end
same(gradients(inner:parameters(), function() return nested_forward(true) end, 4, xi),
     gradients(inner:parameters(), function() return nested_forward(false) end, 4, xi), "nested checkpoints")

-- The generator after backward is where the uncheckpointed run leaves it -------------
gradients(params, net_loss, 5, x)
local after_plain = accel.rand(3)
net:gradient_checkpointing_enable()
gradients(params, net_loss, 5, x)
check.near(accel.rand(3), after_plain, 0, "recomputing draws nothing the recipe sees")
net:gradient_checkpointing_disable()

-- Autocast is restored for the recomputation ---------------------------------------
local function autocast_loss(checkpointed)
  return function()
    local out = core.amp.autocast(function()
      local h = x
      for _, block in ipairs(net.blocks) do h = checkpointed and accel.checkpoint(block, h) or block(h) end
      return net.head(h)
    end, "bfloat16")
    return out:pow(2):mean()
  end
end
local autocast_plain = gradients(params, autocast_loss(false), 5, x)
same(gradients(params, autocast_loss(true), 5, x), autocast_plain, "autocast bfloat16 forward, backward outside it")
check.truthy((autocast_plain[1] - gradients(params, net_loss, 5, x)[1]):abs():max():item() > 1e-4,
             "bfloat16 gives other gradients than float32")

-- Recomputation on another thread: past 60 nested backward passes, LibTorch
-- runs the next on a pool thread while this one waits in backward. ----------------
accel.set_seed(3)
local deep_w = accel.randn(6, 6):mul(0.3):requires_grad_()
local xd = accel.randn(2, 6):requires_grad_()
local function deep(h, depth)
  h = F.dropout(accel.matmul(h, deep_w):tanh(), 0.1) + h
  if depth == 1 then return h end
  return accel.checkpoint(deep, h, depth - 1)
end
local function plain_deep(h, depth)
  h = F.dropout(accel.matmul(h, deep_w):tanh(), 0.1) + h
  if depth == 1 then return h end
  return plain_deep(h, depth - 1)
end
local depth = 64
local deep_plain = gradients({ deep_w }, function() return plain_deep(xd, depth):sum() end, 8, xd)
before = recomputations()
local deep_got = gradients({ deep_w }, function() return accel.checkpoint(deep, xd, depth):sum() end, 8, xd)
local after = recomputations()
check.truthy(after.on_other_threads - before.on_other_threads > 0,
             "some recomputations ran on an autograd pool thread (" .. after.on_other_threads - before.on_other_threads
             .. " of " .. after.total - before.total .. ")")
for i = 1, 2 do check.near(deep_got[i], deep_plain[i], 1e-6, "64 nested checkpoints " .. i) end
-- An error there reaches the recipe the same way.
local deep_failing
local function failing_deep(h, depth_left)
  if depth_left == 1 then
    if deep_failing then error("deep block failed") end
    return h * 2
  end
  return accel.checkpoint(failing_deep, h:tanh(), depth_left - 1)
end
deep_failing = false
local deep_out = accel.checkpoint(failing_deep, xd, depth)
deep_failing = true
check.raises(function() deep_out:sum():backward() end, "an error on a pool thread",
             "test_checkpoint_activations.lua:" .. line_of('error("deep block failed")') .. ": deep block failed")

-- Errors ----------------------------------------------------------------------------
-- Raised by a recomputed block: it names the block's line, and the backward's.
local fail_now = false
local function flaky(h)
  if fail_now then error("the block failed") end
  return (h * 2):tanh()
end
local out = accel.checkpoint(flaky, x)
fail_now = true
local err = check.raises(function() out:sum():backward() end, "an error in a recomputed block",
                         "test_checkpoint_activations.lua:" .. line_of('error("the block failed")') .. ": the block failed",
                         "test_checkpoint_activations.lua:" .. line() - 2 .. ":")
check.truthy(err:find("recomputing the block in backward", 1, true), "the error says when it happened: " .. err)
-- Raised by the engine inside one (a shape error): the block's line too.
local wide = false
local function shapes(h)
  local m = wide and accel.ones(3, 5) or accel.ones(16, 5)
  local product = accel.matmul(h, m)  -- not a tail call, which would leave no line of this function
  return product
end
out = accel.checkpoint(shapes, x)
wide = true
check.raises(function() out:sum():backward() end, "an engine error in a recomputed block",
             "test_checkpoint_activations.lua:" .. line_of("local product = accel.matmul(h, m)") .. ": accel.matmul")
-- After errors, checkpointing works as before.
same(gradients(params, function() return F.cross_entropy(accel.checkpoint(net, x), y) end, 5, x),
     plain, "after errors, a checkpointed call")

-- A recomputation that would compute something else fails.
local grow = 4
out = accel.checkpoint(function(h) return h:narrow(2, 1, grow) * 2 end, x)
grow = 5
check.raises(function() out:sum():backward() end, "other shapes when recomputed",
             "tensor result 1 was float32[8, 4]", "float32[8, 5]")
local changed = accel.randn(8, 16)
out = accel.checkpoint(function(h, c) return h * c end, x, changed)
changed:add_(1)
check.raises(function() out:sum():backward() end, "an input changed in place",
             "tensor argument 2 (float32[8, 16]) was modified in place")
-- A second backward needs retain_graph, as any graph does.
fail_now = false
out = accel.checkpoint(flaky, x):sum()
x.grad = nil
out:backward(nil, true)
local once = x.grad:clone()
out:backward()
check.near(x.grad, once * 2, 1e-6, "retain_graph: two backward passes")
check.raises(function() out:backward() end, "a third backward", "a second time")
check.raises(function() accel.checkpoint(nil, x) end, "no function",
             "accel.checkpoint: expected a function", "test_checkpoint_activations.lua:" .. line() - 1)
-- A module is callable.
check.near(accel.checkpoint(net.head, x), net.head(x), 0, "a module as the function")

check.done("test_checkpoint_activations")
