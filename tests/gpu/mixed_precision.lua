-- bf16 and fp16 train on the GPU: a small regression learns, and fp16 with
-- a loss scale far too large skips its overflowing first steps, lowers the
-- scale and then learns as well. Prints "<precision> loss A -> B, ..." per
-- run (test_gpu_mixed_precision.sh reads them).
local nn, F = accel.nn, accel.nn.functional
local precision, init_scale = arg[1], tonumber(arg[2])

accel.set_seed(0)
local x = accel.randn(512, 16)
local y = x:matmul(accel.randn(16, 4)) + 0.01 * accel.randn(512, 4)
local acc = accel.Accelerator{ mixed_precision = precision,
                               loss_scaler = init_scale and { init_scale = init_scale } or nil }
local model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4))
local opt = accel.optim.Adam(model:parameters(), { lr = 1e-2 })
local loader = accel.data.DataLoader(accel.data.TensorDataset(x, y), { batch_size = 64, shuffle = true })
model, opt, loader = acc:prepare(model, opt, loader)

local first, last, skipped = nil, nil, 0
for epoch = 1, 30 do
  for xb, yb in loader:iter() do
    local loss = F.mse_loss(model(xb), yb)
    first = first or loss:item()
    acc:backward(loss)
    opt:step()
    if opt.step_was_skipped then skipped = skipped + 1 end
    opt:zero_grad()
    last = loss:item()
  end
end
print(string.format("%s loss %.6f -> %.6f, skipped %d, scale %s, device %s", precision, first, last, skipped,
                    tostring(acc:loss_scale()), acc.device))
