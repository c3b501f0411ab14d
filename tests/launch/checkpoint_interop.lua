-- acc:save_model / acc:load_model against files other tools read and
-- write, for tests/launch/test_checkpoint_interop.sh:
--
--   accel-run checkpoint_interop.lua -- write DIR
--     saves a model holding every common dtype as DIR/single (one
--     safetensors file), DIR/sharded (max_shard_size = "150B"), DIR/bin
--     (pytorch_model.bin) and DIR/bin_sharded, and its values as
--     DIR/expected.json for the Python side
--   accel-run checkpoint_interop.lua -- read DIR
--     loads its own four folders back, then DIR/from_python_bin (written by
--     torch.save: every value + 1) and DIR/from_python_st (written by
--     Python's struct module: every value + 2)
local check = dofile(arg[0]:match("(.*/)") .. "../lua/helpers/check.lua")
local nn = accel.nn

local mode, dir = arg[1], arg[2]

local Net = nn.Module:extend("Net")
function Net:init()
  self.encoder = nn.Linear(6, 5)
  self.head = nn.Linear(5, 3)
  self:register_buffer("counts", accel.arange(1, 5))
  self:register_buffer("half", accel.randn(4):to(accel.float16))
  self:register_buffer("brain", accel.randn(2, 2):to(accel.bfloat16))
  self:register_buffer("mask", accel.randn(3):gt(0))
  self:register_buffer("precise", accel.randn(3, { dtype = accel.float64 }))
  self:register_buffer("small", accel.arange(-2, 2):to(accel.int8))
end
function Net:forward(x) return self.head(self.encoder(x)) end

local acc = accel.Accelerator{}
local function fresh()
  accel.set_seed(4)
  return Net()
end
local model = fresh()

-- The model's values, each tensor as {dtype, shape, flat list of numbers}.
local function values_of(m)
  local out = {}
  for name, t in pairs(m:state_dict()) do
    out[name] = { dtype = t.dtype, shape = t:size(), values = t:double():view(-1):totable() }
  end
  return out
end

local function json(value)
  if type(value) == "table" then
    local parts = {}
    if #value > 0 or next(value) == nil then
      for i, v in ipairs(value) do parts[i] = json(v) end
      return "[" .. table.concat(parts, ",") .. "]"
    end
    for k, v in pairs(value) do parts[#parts + 1] = string.format("%q:%s", k, json(v)) end
    return "{" .. table.concat(parts, ",") .. "}"
  end
  if type(value) == "number" then return string.format("%.17g", value) end
  return string.format("%q", value)
end

if mode == "write" then
  check.equal(#acc:save_model(model, dir .. "/single"), 1, "one file")
  local shards = acc:save_model(model, dir .. "/sharded", { max_shard_size = "150B" })
  check.truthy(#shards > 2, "several shards and an index")
  acc:save_model(model, dir .. "/bin", { safe_serialization = false })
  acc:save_model(model, dir .. "/bin_sharded", { safe_serialization = false, max_shard_size = "150B" })
  check.raises(function() acc:save_model(model, dir .. "/x", { max_shard_size = "lots" }) end,
               "a bad shard size", "lots")
  check.raises(function() acc:save_model(model, dir .. "/x", { shard = 1 }) end, "an unknown option", "shard")
  local f = assert(io.open(dir .. "/expected.json", "w"))
  f:write(json(values_of(model)))
  f:close()
  check.done("checkpoint interop write")
  return
end

local expected = values_of(model)

local function check_loaded(folder, transform, what)
  local m = fresh()
  -- Make sure loading changes something: start from other values.
  accel.no_grad(function() m.encoder.weight:fill_(0) end)
  acc:load_model(m, folder)
  for name, t in pairs(m:state_dict()) do
    local want = expected[name]
    check.equal(t.dtype, want.dtype, what .. ": dtype of " .. name)
    check.near(t:size(), want.shape, 0, what .. ": shape of " .. name)
    local values = {}
    for i, v in ipairs(want.values) do values[i] = transform(v, t.dtype) end
    check.near(t:double():view(-1), values, 0, what .. ": " .. name)
  end
end

local function same(v) return v end
-- What Python wrote: v + k rounded to the tensor's dtype; booleans flip for odd k.
local function plus(k)
  return function(v, dtype)
    if dtype == "bool" then return (k % 2 == 1) and (1 - v) or v end
    return accel.tensor({ v + k }, { dtype = accel.float64 }):to(dtype):double():item()
  end
end

check_loaded(dir .. "/single", same, "single safetensors file")
check_loaded(dir .. "/sharded", same, "sharded safetensors")
check_loaded(dir .. "/bin", same, "pytorch_model.bin")
check_loaded(dir .. "/bin_sharded", same, "sharded pytorch_model.bin")
check_loaded(dir .. "/from_python_bin", plus(1), "torch.save from Python")
check_loaded(dir .. "/from_python_st", plus(2), "safetensors from Python's struct")

local wrong = nn.Linear(2, 2)
check.raises(function() acc:load_model(wrong, dir .. "/single") end, "a model with other keys",
             "single", "unexpected keys")
check.raises(function() acc:load_model(model, dir .. "/nothing") end, "a folder without weights",
             "holds no model weights")
check.done("checkpoint interop read")
