-- Checkpoints of a model trained at ZeRO stage 3 (FSDP FULL_SHARD, a unit
-- per Block), for tests/launch/test_sharding_checkpoint.sh:
--
--   accel-run sharding_checkpoint.lua --nproc 2 -- save DIR
--     3 updates, save_state(DIR/checkpoint), DIR/reference.lua (the full
--     weights and optimizer state saved), 3 more updates, DIR/after.lua
--   accel-run sharding_checkpoint.lua --nproc 2 -- resume DIR
--     load_state, checks the reference exactly, 3 updates, checks after.lua exactly
--   accel-run sharding_checkpoint.lua --nproc 3 -- load DIR [STAGE]
--     load_state on 3 ranks (at ZeRO STAGE, or plain data parallel with 0),
--     checks the reference exactly and trains one more update
--   accel-run sharding_checkpoint.lua --nproc 2 -- save_mid DIR STAGE
--     accumulation over 2 micro-steps: 3 micro-steps, save_state in the
--     middle of the second update (DIR/checkpoint_mid), the 4th, DIR/after_mid.lua
--   accel-run sharding_checkpoint.lua --nproc 2 -- resume_mid DIR STAGE
--     load_state(DIR/checkpoint_mid), the 4th micro-step, checks after_mid.lua
--     exactly: the gradient accumulated before the save was kept
-- A 4th argument, SHARDED_STATE_DICT, makes stages 2 and 3 go through the
-- FSDP plugin with that state_dict_type: each rank saves its own slices.
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local serialize = require("accel.serialize")
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local mode, dir, stage, state_dict_type = arg[1], arg[2], tonumber(arg[3] or "3"), arg[4]

local Block = nn.Module:extend("Block")
function Block:init(d)
  self.fc = nn.Linear(d, d)
  self.norm = nn.LayerNorm(d)
end
function Block:forward(x) return x + F.gelu(self.norm(self.fc(x))) end

local Net = nn.Module:extend("Net")
function Net:init()
  self.embed = nn.Linear(4, 6)
  self.block1 = Block(6)
  self.block2 = Block(6)
  self.head = nn.Linear(6, 2)
end
function Net:forward(x) return self.head(self.block2(self.block1(self.embed(x)))) end

local options = {}
if stage == 3 or (stage == 2 and state_dict_type) then
  options.fsdp_plugin = accel.FullyShardedDataParallelPlugin{
    sharding_strategy = stage == 3 and "FULL_SHARD" or "SHARD_GRAD_OP", transformer_layer_cls = "Block",
    state_dict_type = state_dict_type }
elseif stage > 0 then
  options.zero_stage = stage
end
local accumulating = mode == "save_mid" or mode == "resume_mid"
if accumulating then options.gradient_accumulation_steps = 2 end
local acc = accel.Accelerator(options)
accel.set_seed((mode == "save" or mode == "save_mid") and 7 or 8)  -- a resumed run starts from other weights
local model = Net()
local opt = optim.AdamW(model:parameters(), { lr = 0.05 })
model, opt = acc:prepare(model, opt)

-- Update u's batch of this rank: the same whatever ran before, drawn on
-- the CPU and moved to the model's device (a GPU where one is).
local function batch(u)
  accel.set_seed(100 + u * 10 + acc.process_index)
  return accel.randn(4, 4):to(acc.device), accel.randint(1, 3, { 4 }):to(acc.device)
end

local function update(u)
  local x, y = batch(u)
  acc:backward(F.cross_entropy(model(x), y))
  acc:clip_grad_norm(model:parameters(), 1.0)
  opt:step(); opt:zero_grad()
end

-- Micro-step u of an accumulation over 2: the same batch whatever ran before.
local function micro_step(u)
  local x, y = batch(u)
  acc:accumulate(model, function()
    acc:backward(F.cross_entropy(model(x), y))
    opt:step(); opt:zero_grad()
  end)
end

local function tables_of(map)
  local out = {}
  for k, t in pairs(map) do out[k] = t:double():totable() end
  return out
end

local function snapshot()
  return { model = tables_of(acc:get_state_dict(model)), optimizer = tables_of(opt:state_dict()) }
end

local function write(name, value)
  if not acc.is_main_process then return end
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(serialize.dump(value))
  f:close()
end

local function read(name)
  return serialize.load(assert(io.open(dir .. "/" .. name)):read("*a"))
end

local function check_same(got, want, what)
  for name, values in pairs(want.model) do check.near(got.model[name], values, 0, what .. ": model " .. name) end
  for key, values in pairs(want.optimizer) do
    check.truthy(got.optimizer[key] ~= nil, what .. ": optimizer key " .. key)
    check.near(got.optimizer[key], values, 0, what .. ": optimizer " .. key)
  end
end

if mode == "save_mid" then
  for u = 1, 3 do micro_step(u) end
  check.equal(acc.sync_gradients, false, "saved between two micro-steps of one update")
  acc:save_state(dir .. "/checkpoint_mid")
  micro_step(4)
  check.equal(opt.updates, 2, "two updates from four micro-steps")
  write("after_mid.lua", snapshot())
elseif mode == "resume_mid" then
  acc:load_state(dir .. "/checkpoint_mid")
  micro_step(4)
  check_same(snapshot(), read("after_mid.lua"), "resumed mid-accumulation")
elseif mode == "save" then
  for u = 1, 3 do update(u) end
  acc:save_state(dir .. "/checkpoint")
  write("reference.lua", snapshot())
  for u = 4, 6 do update(u) end
  write("after.lua", snapshot())
else
  acc:load_state(dir .. "/checkpoint")
  check_same(snapshot(), read("reference.lua"), "loaded")
  if mode == "resume" then
    for u = 4, 6 do update(u) end
    check_same(snapshot(), read("after.lua"), "resumed")
  else
    update(4)
    check.equal(opt.updates, 4, "one more update after loading")
  end
end
check.done("sharding checkpoint " .. mode)
acc:end_training()
