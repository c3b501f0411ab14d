-- The small transformer-like model the sharding tests train against plain
-- data parallel, its optimizer (two param groups) and their side-by-side
-- training: 10 AdamW updates of gradient accumulation over 2 micro-steps,
-- with clipping that bites. Shared by sharding_check.lua and
-- empty_init_check.lua.
local nn, optim, F = accel.nn, accel.optim, accel.nn.functional

local net = { accumulation = 2, updates = 10, batch = 4 }

local Block = nn.Module:extend("Block")
function Block:init(d)
  self.fc1 = nn.Linear(d, 2 * d)
  self.norm = nn.LayerNorm(2 * d)
  self.fc2 = nn.Linear(2 * d, d)
end
function Block:forward(x)
  return x + self.fc2(F.gelu(self.norm(self.fc1(x))))
end

-- Net(width): a buffer scales the embedding, so that buffers are synchronised too.
net.Net = nn.Module:extend("Net")
function net.Net:init(width)
  width = width or 8
  self.embed = nn.Linear(5, width)
  self:register_buffer("scale", accel.rand(width) + 0.5)
  self.block1 = Block(width)
  self.block2 = Block(width)
  self.head = nn.Linear(width, 3)
end
function net.Net:forward(x)
  return self.head(self.block2(self.block1(self.embed(x) * self.scale)))
end

-- AdamW with weight decay on the weights, none on biases and norms.
function net.optimizer(model)
  local decay, no_decay = {}, {}
  for name, p in model:named_parameters() do
    local list = (name:find("bias") or name:find("norm")) and no_decay or decay
    list[#list + 1] = p
  end
  return optim.AdamW({ { params = decay }, { params = no_decay, weight_decay = 0 } },
                     { lr = 2e-2, weight_decay = 0.1 })
end

-- Runs every micro-step on each run ({acc, model, opt[, norms]}), side by
-- side, with the same data; a run with `norms` records the clipped norms.
function net.train(runs)
  local rank, world = runs[1].acc.process_index, runs[1].acc.num_processes
  local B = net.batch
  accel.set_seed(3)
  local n = net.updates * net.accumulation * B * world
  local x, y = accel.randn(n, 5), accel.randint(1, 4, { n })
  for micro = 1, net.updates * net.accumulation do
    local first = ((micro - 1) * world + rank) * B + 1
    local xb, yb = x:narrow(1, first, B), y:narrow(1, first, B)
    for _, run in ipairs(runs) do
      run.acc:accumulate(run.model, function()
        run.acc:backward(F.cross_entropy(run.model(xb), yb))
        local norm = run.acc:clip_grad_norm(run.model:parameters(), 0.5)
        if norm and run.norms then run.norms[#run.norms + 1] = norm:item() end
        run.opt:step()
        run.opt:zero_grad()
      end)
    end
  end
end

return net
