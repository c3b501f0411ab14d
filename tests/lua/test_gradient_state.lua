-- nproc: 2
-- acc.gradient_state keeps a stack of the prepared loaders being iterated,
-- as Accelerate's GradientState: a loader iterated inside another's loop
-- (an evaluation loop inside the training loop) is popped when it ends, and
-- the outer loader's end_of_dataloader and batch padding are current again,
-- so the epoch's last accumulated update is still forced.
local check = dofile(arg[0]:match("(.*/)") .. "helpers/check.lua")
local GradientState = require("accel.gradient_state")
local nn, optim, data = accel.nn, accel.optim, accel.data
local F = nn.functional

-- Training with accumulation, an evaluation loader iterated inside the
-- training loop (at every batch, or only at the last): the updates come at
-- micro-steps 2, 4 and, forced by the end of the loader, 5.
for _, when in ipairs({ "every batch", "last batch" }) do
  local acc = accel.Accelerator{ gradient_accumulation_steps = 2 }
  accel.set_seed(5)
  local train = data.DataLoader(data.TensorDataset(accel.randn(20, 3), accel.randn(20, 1)), { batch_size = 2 })
  local eval = data.DataLoader(data.TensorDataset(accel.randn(6, 3), accel.randn(6, 1)), { batch_size = 2 })
  local model = nn.Linear(3, 1)
  local opt = optim.SGD(model:parameters(), { lr = 0.1 })
  model, opt, train, eval = acc:prepare(model, opt, train, eval)
  check.equal(train:num_batches(), 5, when .. ": 5 training batches per rank")
  local syncs, ends, k = {}, {}, 0
  for epoch = 1, 2 do
    k = 0
    for x, y in train:iter() do
      k = k + 1
      check.equal(acc.gradient_state.active_loader, train, when .. ": the training loader is active")
      if when == "every batch" or k == train:num_batches() then
        local inner = 0
        for ex in eval:iter() do
          inner = inner + 1
          check.equal(acc.gradient_state.active_loader, eval, when .. ": the evaluation loader is active in its loop")
          check.equal(acc.gradient_state.end_of_dataloader, inner == eval:num_batches(),
                      when .. ": end_of_dataloader follows the evaluation loader in its loop")
          acc:gather_for_metrics(model(ex))
        end
        check.equal(acc.gradient_state.active_loader, train, when .. ": the training loader is active again")
      end
      ends[#ends + 1] = tostring(acc.gradient_state.end_of_dataloader)
      acc:accumulate(model, function()
        acc:backward(F.mse_loss(model(x), y))
        syncs[#syncs + 1] = tostring(acc.sync_gradients)
        opt:step(); opt:zero_grad()
      end)
    end
    check.equal(acc.gradient_state.active_loader, nil, when .. ": no active loader after the epoch")
    check.equal(acc.gradient_state.in_dataloader, false, when .. ": not in a loader after the epoch")
  end
  check.equal(table.concat(ends, " "), "false false false false true false false false false true",
              when .. ": end_of_dataloader at the training loader's last batch, after the inner loop")
  check.equal(table.concat(syncs, " "), "false true false true true false true false true true",
              when .. ": the last accumulated update of each epoch is forced")
  check.equal(opt.updates, 6, when .. ": three updates per epoch")
end

-- The stack itself, with loaders on one rank (shard(0, 1)).
do
  local state = GradientState()
  local function loader(n)
    local l = data.DataLoader(data.TensorDataset(accel.arange(n)), { batch_size = 1 })
    l:shard(0, 1, { state = state })
    return l
  end
  local outer, inner, third = loader(2), loader(3), loader(2)
  check.equal(state.end_of_dataloader, false, "a new state: not at an end")
  check.equal(state.active_loader, nil, "a new state: no active loader")
  local seen = {}
  for _ in outer:iter() do
    for _ in inner:iter() do
      for _ in third:iter() do seen[#seen + 1] = "third:" .. tostring(state.end_of_dataloader) end
      seen[#seen + 1] = "inner:" .. tostring(state.end_of_dataloader)
    end
    seen[#seen + 1] = "outer:" .. tostring(state.end_of_dataloader)
    check.equal(state.active_loader, outer, "the outer loader is active after the inner loops")
    check.equal(#state:dataloaders(), 1, "one loader on the stack after the inner loops")
  end
  check.equal(table.concat(seen, " "),
              "third:false third:true inner:false third:false third:true inner:false third:false third:true inner:true "
              .. "outer:false third:false third:true inner:false third:false third:true inner:false third:false "
              .. "third:true inner:true outer:true", "end_of_dataloader of the innermost loader being iterated")
  check.equal(state.active_loader, nil, "all loops ended")

  -- An inner loop left with break: the outer loader's next batch drops it.
  local inner_left = {}
  for _ in outer:iter() do
    for _ in inner:iter() do break end
    inner_left[#inner_left + 1] = state.active_loader == inner
  end
  check.equal(state.active_loader, nil, "the outer loader's end drops the abandoned inner one")
  check.equal(#state:dataloaders(), 0, "nothing left on the stack")
  check.near(inner_left, { true, true }, 0, "the abandoned inner loader stays on top until the outer loader moves")

  -- set_epoch retires a loader's iteration, and it leaves the stack.
  local it = outer:iter()
  it()
  check.equal(state.active_loader, outer, "iterating")
  outer:set_epoch(5)
  check.equal(state.active_loader, nil, "set_epoch leaves the stack")

  -- padding facts and remainder follow the active loader
  for _ in inner:iter() do
    check.near(state.batch_padding, { 0 }, 0, "no padding on one rank")
    check.equal(state.remainder, 0, "no padding rows")
  end
  check.equal(state.batch_padding, nil, "no current batch after the epoch")
  check.raises(function() loader(2):shard(0, 1, { state = {} }) end, "a plain table as the state",
               "state must be a GradientState")
end

-- The GradientState owns synchronisation: the Accelerator's sync_gradients
-- and gradient_accumulation_steps read and write it, the prepared optimizer
-- asks it, and its counters travel through state_dict.
do
  local acc = accel.Accelerator{ gradient_accumulation_steps = 3 }
  local gs = acc.gradient_state
  check.equal(gs.num_steps, 3, "gradient_accumulation_steps is the state's num_steps")
  acc.gradient_accumulation_steps = 2
  check.equal(gs.num_steps, 2, "setting gradient_accumulation_steps sets the state's")
  check.equal(rawget(acc, "sync_gradients"), nil, "the Accelerator keeps no copy of sync_gradients")
  local model = nn.Linear(2, 1)
  local opt = optim.SGD(model:parameters(), { lr = 1 })
  model, opt = acc:prepare(model, opt)
  check.equal(opt.gradient_state, gs, "the prepared optimizer holds the GradientState")
  local before = model.weight:clone()
  acc:accumulate(model, function()
    acc:backward(model(accel.ones(1, 2)):sum(), { num_items = 1 })
    check.equal(acc.sync_gradients, false, "first of two micro-steps: no sync")
    check.equal(gs.items, 1, "the state counts backward's items")
    opt:step()
  end)
  check.near(model.weight, before, 0, "no update off a sync step")
  local saved = gs:state_dict()
  check.near({ saved.micro_step, saved.sync_steps, saved.items }, { 1, 0, 1 }, 0, "state_dict holds the counters")
  check.equal(saved.sync_gradients, false, "state_dict holds sync_gradients")
  local all_reduces = require("accel.core").dist.counts().all_reduce
  acc:accumulate(model, function()
    acc:backward(model(accel.ones(1, 2)):sum(), { num_items = 1 })
    opt:step()
  end)
  check.equal(gs.sync_steps, 1, "a synchronised step is counted")
  check.equal(gs.items, 0, "the items are counted anew after a sync")
  -- Two items on each of two ranks: the summed gradient (4) over 4 items.
  check.near(model.weight, before - accel.ones(1, 2), 1e-6, "the update divides by the items of all ranks")
  check.equal(require("accel.core").dist.counts().all_reduce - all_reduces, 1,
              "the items of all ranks ride in the gradient bucket: one all-reduce per sync")
  gs:load_state_dict(saved)
  check.near({ gs.micro_step, gs.sync_steps, gs.items }, { 1, 0, 1 }, 0, "load_state_dict restores the counters")
  check.equal(acc.sync_gradients, false, "and sync_gradients")
  check.raises(function() GradientState{ steps = 2 } end, "an unknown option", "unknown option 'steps'")
end

check.done("test_gradient_state")
