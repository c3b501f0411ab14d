-- train_steps(acc, model, opt, loader, steps): that many training steps of
-- a regression model (mean squared error) from the loader's current epoch,
-- leaving the loop with break as a recipe between checkpoints would. The
-- checkpoint tests train a little between saves and loads.
return function(acc, model, opt, loader, steps)
  local n = 0
  for x, y in loader:iter() do
    acc:backward(accel.nn.functional.mse_loss(model(x), y))
    opt:step(); opt:zero_grad()
    n = n + 1
    if n == steps then break end
  end
end
