-- A short training run for tests/launch/test_serve.sh, run under
-- `accel-run serve` and cold, whose output and saved weights must agree:
--   accel-run serve_recipe.lua -- OUT_DIR SEED STEPS [fail]
-- It says what it finds of an earlier run in its process (a global, a
-- module in package.loaded, the Lua and LibTorch random streams before it
-- seeds them are the process's own: only their kind is printed), trains a
-- small model with AdamW on its seed's data, prints the loss on every rank,
-- and saves the weights (acc:save_model). `fail` raises on the last rank
-- after the first step.
local out_dir, seed, steps, fail = arg[1], tonumber(arg[2]), tonumber(arg[3]), arg[4] == "fail"
local nn, optim, data = accel.nn, accel.optim, accel.data

print(string.format("left by an earlier run: global %s, module %s", tostring(rawget(_G, "served_before")),
                    tostring(package.loaded["serve_recipe_module"])))
served_before = seed
package.loaded["serve_recipe_module"] = true
print(string.format("default dtype %s, grad enabled %s", accel.get_default_dtype(), tostring(accel.is_grad_enabled())))

acc = accel.Accelerator{}
accel.set_seed(seed)
print(string.format("first draw after set_seed: %.9g %d", accel.rand(1):item(), math.random(1000)))
local x = accel.randn(64, 6)
local y = x:sum(2, true) * 0.5 + accel.randn(64, 1) * 0.1
local loader = data.DataLoader(data.TensorDataset(x, y), { batch_size = 8, shuffle = true })
local model = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))
local opt = optim.AdamW(model:parameters(), { lr = 0.01 })
model, opt, loader = acc:prepare(model, opt, loader)

while opt.updates < steps do
  for xb, yb in loader:iter() do
    local loss = nn.functional.mse_loss(model(xb), yb)
    acc:backward(loss)
    opt:step()
    opt:zero_grad()
    print(string.format("rank %d step %d loss %.9g", acc.process_index, opt.updates, loss:item()))
    if fail and opt.updates == 1 and acc.process_index == acc.num_processes - 1 then
      accel.set_default_dtype(accel.float64)
      error("serve_recipe: asked to fail")
    end
    if opt.updates == steps then break end
  end
end
acc:save_model(model, out_dir)
-- Left changed for the next run to find, were it to leak.
accel.set_default_dtype(accel.float64)
