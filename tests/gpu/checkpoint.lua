-- accel.checkpoint on the GPU, where autograd runs a node whose gradients
-- are on the GPU on that device's worker thread: the recomputation enters
-- Lua from that thread while the recipe's waits in backward (Note [Lua in
-- backward], bindings/lua_in_backward.h). Gradients of 12 layers with
-- dropout (the CUDA generator restored) and under bf16 autocast equal the
-- uncheckpointed ones; an error in a recomputed block names its line; a
-- 12-layer Llama with attention dropout under gradient_checkpointing_enable.
-- Run by test_gpu_checkpoint.sh; prints "ok: ..." per check, errors on a failure.
local core = require("accel.core")
local nn, F = accel.nn, accel.nn.functional

local function check(what, ok, detail)
  if not ok then error("FAILED: " .. what .. (detail and (": " .. tostring(detail)) or ""), 0) end
  print("ok: " .. what)
end

local Block = nn.Module:extend("Block")
function Block:init(d)
  self.fc1 = nn.Linear(d, 4 * d)
  self.drop = nn.Dropout(0.2)
  self.fc2 = nn.Linear(4 * d, d)
end
function Block:forward(x) return x + self.fc2(self.drop(F.gelu(self.fc1(x)))) end

local Net = nn.Module:extend("Net")
function Net:init(d, depth)
  local blocks = {}
  for i = 1, depth do blocks[i] = Block(d) end
  self.blocks = nn.ModuleList(blocks)
end
function Net:forward(x)
  for _, block in ipairs(self.blocks) do x = block(x) end
  return x
end

accel.set_seed(1)
local net = Net(64, 12):to("cuda:0")
local x = accel.randn(32, 64):cuda():requires_grad_()
local params = net:parameters()

local function gradients(loss_of, seed)
  for _, p in ipairs(params) do p.grad = nil end
  x.grad = nil
  accel.set_seed(seed)
  loss_of():backward()
  local out = { x.grad:cpu() }
  for _, p in ipairs(params) do out[#out + 1] = p.grad:cpu() end
  return out
end

local function same(a, b)
  for i = 1, #a do
    if not a[i]:equal(b[i]) then return false, "gradient " .. i .. " differs by " .. (a[i] - b[i]):abs():max():item() end
  end
  return #a == #b
end

local function loss() return net(x):pow(2):mean() end
local plain = gradients(loss, 5)
net:gradient_checkpointing_enable()
local before = core.autograd.recomputations()
local checkpointed = gradients(loss, 5)
local after = core.autograd.recomputations()
check("12 checkpointed layers with dropout: the same gradients bit for bit", same(checkpointed, plain))
check("recomputed on the GPU's autograd thread", after.on_other_threads - before.on_other_threads == 12,
      after.on_other_threads - before.on_other_threads)
check("dropout draws differently from another seed", not same(gradients(loss, 6), plain))

local function autocast_loss()
  return core.amp.autocast(function() return net(x) end, "bfloat16", "cuda"):float():pow(2):mean()
end
net:gradient_checkpointing_disable()
local autocast_plain = gradients(autocast_loss, 5)
net:gradient_checkpointing_enable()
check("bf16 autocast: the same gradients", same(gradients(autocast_loss, 5), autocast_plain))

local fail = false
local flaky_line = debug.getinfo(1, "l").currentline + 2
local function flaky(h)
  if fail then error("the block failed on the GPU thread") end
  return (h * 2):tanh()
end
local y = accel.checkpoint(flaky, x)
fail = true
local ok, err = pcall(function() y:sum():backward() end)
check("an error in a recomputed block names its line",
      not ok and tostring(err):find("checkpoint.lua:" .. flaky_line .. ": the block failed on the GPU thread", 1, true),
      err)
local z = accel.checkpoint(net, x)
z:sum():backward()
check("checkpointing works after the error", x.grad ~= nil)

local llama = accel.models.from_config({
  model_type = "llama", vocab_size = 64, hidden_size = 64, intermediate_size = 128, num_hidden_layers = 12,
  num_attention_heads = 4, num_key_value_heads = 2, attention_dropout = 0.2, max_position_embeddings = 64,
}):to("cuda:0")
local ids = accel.randint(0, 64, { 2, 32 }):cuda()
local lparams = llama:parameters()
local function llama_grads()
  for _, p in ipairs(lparams) do p.grad = nil end
  accel.set_seed(9)
  llama{ input_ids = ids, labels = ids }.loss:backward()
  local out = {}
  for i, p in ipairs(lparams) do out[i] = p.grad:cpu() end
  return out
end
local llama_plain = llama_grads()
llama:gradient_checkpointing_enable()
local llama_checkpointed = llama_grads()
local worst = 0
for i = 1, #llama_plain do worst = math.max(worst, (llama_checkpointed[i] - llama_plain[i]):abs():max():item()) end
check("a 12-layer Llama with attention dropout: gradients within 1e-6", worst <= 1e-6, worst)
