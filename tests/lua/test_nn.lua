-- Modules: Lua-defined classes, registration order, state dicts, Linear's
-- math, Sequential, and an optimizer step.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local nn, F = accel.nn, accel.nn.functional

accel.set_seed(3)

-- A Lua-defined module: fields holding modules and parameters are registered.
local Block = nn.Module:extend("Block")
function Block:init(dim)
  self.fc = nn.Linear(dim, dim)
  self.scale = accel.ones(dim, { requires_grad = true })
  self.note = "not state"
  self:register_buffer("count", accel.zeros(1))
end
function Block:forward(x)
  return self.fc(x):relu() * self.scale
end

local Net = nn.Module:extend("Net")
function Net:init()
  self.layers = nn.Sequential(Block(4), Block(4))
  self.head = nn.Linear(4, 2, false)
end
function Net:forward(x)
  return self.head(self.layers(x))
end

local net = Net()
local names = {}
for name, p in net:named_parameters() do names[#names + 1] = name end
-- As in PyTorch, a module's own parameters come before its children's.
check.equal(table.concat(names, " "),
            "layers.1.scale layers.1.fc.weight layers.1.fc.bias layers.2.scale layers.2.fc.weight layers.2.fc.bias head.weight",
            "named_parameters in PyTorch's order with dotted 1-based paths")
check.equal(#net:parameters(), 7, "parameters()")
check.equal(net:num_parameters(), 2 * (16 + 4 + 4) + 8, "num_parameters")
check.equal(#net:buffers(), 2, "buffers()")
local sd = net:state_dict()
check.truthy(sd["layers.2.count"] ~= nil, "buffers are in the state dict")
check.equal(sd["layers.1.note"], nil, "plain fields are not state")
check.equal(net(accel.randn(5, 4)):size(2), 2, "forward through the tree")
check.equal(tostring(Block), "Block", "class name")

-- load_state_dict copies values and refuses mismatched keys, listing them
local other = Net()
other:load_state_dict(net:state_dict())
check.near(other.head.weight, net.head.weight, 0, "load_state_dict copies")
local partial = net:state_dict()
partial["head.weight"] = nil
partial["extra.bias"] = accel.zeros(1)
check.raises(function() other:load_state_dict(partial) end, "strict load",
             "missing keys: head.weight", "unexpected keys: extra.bias")
local wrong = net:state_dict()
wrong["head.weight"] = accel.zeros(3, 3)
check.raises(function() other:load_state_dict(wrong) end, "shape mismatch", "head.weight", "[3, 3]", "[2, 4]")

-- Every problem in one error, in the module's order (not a hash walk's), and nothing copied.
local seq = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 4))
local bad = seq:state_dict()
bad["1.weight"], bad["1.bias"], bad["3.weight"] = accel.zeros(5, 2), accel.zeros(5), accel.zeros(1, 1)
bad["3.bias"] = nil
bad["0.weight"], bad["9.extra"] = accel.zeros(1), accel.zeros(1)
local kept = seq[1].weight:clone()
local ok, err = pcall(seq.load_state_dict, seq, bad)
check.equal(ok, false, "a state dict with several problems is refused")
err = tostring(err)
local function at(needle) return err:find(needle, 1, true) or math.huge end
check.truthy(at("'1.weight' has shape [5, 2]") < at("'1.bias' has shape [5]")
             and at("'1.bias' has shape [5]") < at("'3.weight' has shape [1, 1] in the state dict but [4, 3]"),
             "every size mismatch, in the module's order: " .. err)
check.truthy(at("missing keys: 3.bias") < math.huge, "the missing key: " .. err)
check.truthy(at("unexpected keys: 0.weight, 9.extra") < math.huge, "the unexpected keys, sorted: " .. err)
check.near(seq[1].weight, kept, 0, "nothing was copied")
bad["0.weight"], bad["9.extra"], bad["3.bias"] = nil, nil, accel.zeros(4)
check.raises(function() seq:load_state_dict(bad, false) end, "size mismatches without strict", "size mismatch",
             "'1.weight'")

-- Linear computes x W^T + b, initialised within +-1/sqrt(in)
local lin = nn.Linear(3, 2)
local x = accel.randn(4, 3)
check.near(lin(x), accel.matmul(x, lin.weight:t()) + lin.bias, 1e-6, "Linear math")
check.truthy(lin.weight:abs():max():item() <= 1 / math.sqrt(3), "Linear init bound")
check.raises(function() nn.Sequential(nn.Linear(2, 2), 5) end, "Sequential args", "argument 2")

-- train/eval reach every module; zero_grad clears grads
net:eval()
check.equal(net.layers[2].training, false, "eval reaches submodules")
net:train()
check.equal(net.layers[2].fc.training, true, "train reaches submodules")

-- an optimizer step on a model lowers its loss
local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
local opt = accel.optim.SGD(model:parameters(), { lr = 0.1 })
local data_x, data_y = accel.randn(16, 4), accel.randint(1, 4, { 16 })
local first = F.cross_entropy(model(data_x), data_y):item()
for _ = 1, 20 do
  F.cross_entropy(model(data_x), data_y):backward()
  opt:step()
  opt:zero_grad()
end
check.truthy(F.cross_entropy(model(data_x), data_y):item() < first, "SGD lowers the loss")
check.equal(model[1].weight.grad, nil, "zero_grad releases grads")
check.raises(function() accel.optim.AdamW(model:parameters(), { lr = 1e-3, momentum = 0.9 }) end,
             "unknown optimizer option", "momentum")
check.near(opt:option("lr"), 0.1, 0, "option('lr')")
opt:set_option("lr", 0.05)
check.near(opt:option("lr", 1), 0.05, 0, "set_option")

-- class targets are 1-based
check.raises(function() F.cross_entropy(accel.randn(2, 3), accel.LongTensor({ 0, 1 })) end,
             "0 is not a class", "class targets are 1-based, but one is 0")
check.near(F.cross_entropy(accel.tensor({ { 0, 100 } }), accel.LongTensor({ 2 })), 0, 1e-6,
           "target 2 is the second class")

check.done("test_nn")
