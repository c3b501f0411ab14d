-- Saving on one number of ranks and loading on another, for
-- tests/launch/test_checkpoint_world_size.sh:
--
--   accel-run checkpoint_world_size.lua --nproc 2 -- save DIR
--     trains 3 steps into the first epoch, saves DIR/checkpoint, and writes
--     DIR/reference.lua: the model's and optimizer's tensors and the sample
--     ids read so far (over all ranks)
--   accel-run checkpoint_world_size.lua --nproc 3 -- load DIR
--     loads DIR/checkpoint, checks model and optimizer against the
--     reference, then reads the rest of the epoch and checks that, with the
--     ids read before the save, every sample was read exactly once
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local serialize = require("accel.serialize")
local nn, optim, data = accel.nn, accel.optim, accel.data

local mode, dir = arg[1], arg[2]
local n, steps_before_save = 50, 3

local acc = accel.Accelerator{}
accel.set_seed(5)
local features = accel.randn(n, 4)
local ids = accel.arange(1, n + 1)
local loader = data.DataLoader(data.TensorDataset(features, ids), { batch_size = 4, shuffle = true })
local model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
local opt = optim.AdamW(model:parameters(), { lr = 0.05 })
model, opt, loader = acc:prepare(model, opt, loader)

local function tables_of(map)
  local out = {}
  for k, t in pairs(map) do out[k] = t:double():totable() end
  return out
end

local function train_step(x)
  acc:backward(model(x):pow(2):mean())
  opt:step(); opt:zero_grad()
end

if mode == "save" then
  local seen = {}
  for x, id in loader:iter() do
    train_step(x)
    for _, v in ipairs(acc:gather_for_metrics(id):totable()) do seen[#seen + 1] = v end
    if opt.updates == steps_before_save then break end
  end
  acc:save_state(dir .. "/checkpoint")
  if acc.is_main_process then
    local f = assert(io.open(dir .. "/reference.lua", "w"))
    f:write(serialize.dump({ model = tables_of(model:state_dict()), optimizer = tables_of(opt:state_dict()),
                             seen = seen }))
    f:close()
  end
  acc:end_training()
  return
end

local reference = serialize.load(assert(io.open(dir .. "/reference.lua")):read("*a"))
-- The freshly made model differs from the saved one: loading must change it.
check.truthy(math.abs(model:state_dict()["1.weight"]:double():totable()[1][1]
                      - reference.model["1.weight"][1][1]) > 1e-9, "the new model starts elsewhere")
acc:load_state(dir .. "/checkpoint")
for name, values in pairs(reference.model) do
  check.near(model:state_dict()[name]:double(), values, 0, "model " .. name)
end
local state = opt:state_dict()
for key, values in pairs(reference.optimizer) do
  check.truthy(state[key] ~= nil, "optimizer key " .. key)
  check.near(state[key]:double(), values, 0, "optimizer " .. key)
end
check.equal(opt.updates, steps_before_save, "optimizer updates")

local count = {}
for _, v in ipairs(reference.seen) do count[v] = (count[v] or 0) + 1 end
local batches = 0
for x, id in loader:iter() do
  train_step(x)
  batches = batches + 1
  for _, v in ipairs(acc:gather_for_metrics(id):totable()) do count[v] = (count[v] or 0) + 1 end
end
check.truthy(batches > 0, "the epoch continued")
for i = 1, n do check.equal(count[i], 1, "sample " .. i .. " read once over both runs") end
check.equal(loader.epoch, 1, "the next iter() starts epoch 1")
check.done("checkpoint world size")
acc:end_training()
